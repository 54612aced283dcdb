#!/usr/bin/env bash
# Install what the editor test (tests/test_lsp_neovim.py) needs: Debian's neovim (0.7.2 on Debian 12, 0.10 on 13),
# which drives `electra-detect lsp` headless through tests/lsp/quickfix.lua (Neovim 0.7's LSP API only).
#
# Usage: scripts/install_neovim.sh
#
# Idempotent and quick when nvim is present. Needs no TTY. It never fails the caller: when apt is unavailable it
# says why and exits 0, and the test then skips with a clear reason, so `make test` goes on.
set -u

say() { echo "install_neovim: $*" >&2; }

if ! command -v nvim >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        apt_get=(apt-get)
    elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
        apt_get=(sudo -n apt-get)
    else
        apt_get=()
        say "not root and no password-less sudo: cannot install neovim; the Neovim test will skip"
    fi
    if [ "${#apt_get[@]}" -gt 0 ] && ! command -v apt-get >/dev/null 2>&1; then
        apt_get=()
        say "apt-get not found: cannot install neovim; the Neovim test will skip"
    fi
    if [ "${#apt_get[@]}" -gt 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        lock=(-o DPkg::Lock::Timeout=300)
        say "installing neovim with apt-get (once; later runs skip this)"
        # a failed update may still leave usable package lists from an earlier one: try the install anyway
        "${apt_get[@]}" "${lock[@]}" update -qq >/dev/null 2>&1 || say "apt-get update failed; trying the install anyway"
        if "${apt_get[@]}" "${lock[@]}" install -y -qq --no-install-recommends neovim >/dev/null 2>&1; then
            say "installed neovim"
        else
            say "apt-get could not install neovim; the Neovim test will skip"
        fi
    fi
fi

if command -v nvim >/dev/null 2>&1; then
    say "ready: $(nvim --version 2>/dev/null | head -n 1)"
fi
exit 0
