#!/usr/bin/env bash
# Install what the browser tests (tests/test_demo_browser.py) need: Debian's chromium, a font,
# and Playwright for Python in the project's venv. Never runs `playwright install` (that
# downloads a browser build, which cannot be fetched here): Playwright drives /usr/bin/chromium.
#
# Usage: scripts/install_browser.sh [PYTHON]     (PYTHON defaults to .venv/bin/python)
#
# Idempotent and quick when everything is present. Needs no TTY. It never fails the caller:
# when apt or pip is unavailable it says why and exits 0, and the browser tests then skip with
# a clear reason, so `make test` goes on.
set -u

PYTHON="${1:-.venv/bin/python}"
PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"
CHROMIUM="${ELECTRA_DETECT_CHROMIUM:-/usr/bin/chromium}"

say() { echo "install_browser: $*" >&2; }

have_chromium() { [ -x "$CHROMIUM" ]; }
have_font() { command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list 2>/dev/null | head -n 1)" ]; }
have_playwright() { [ -x "$PYTHON" ] && "$PYTHON" -c "import playwright.sync_api" >/dev/null 2>&1; }

if ! have_chromium || ! have_font; then
    packages=()
    have_chromium || packages+=(chromium)
    have_font || packages+=(fonts-dejavu-core fontconfig)
    if [ "$(id -u)" -eq 0 ]; then
        apt_get=(apt-get)
    elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
        apt_get=(sudo -n apt-get)
    else
        apt_get=()
        say "not root and no password-less sudo: cannot install ${packages[*]}; browser tests will skip"
    fi
    if [ "${#apt_get[@]}" -gt 0 ] && ! command -v apt-get >/dev/null 2>&1; then
        apt_get=()
        say "apt-get not found: cannot install ${packages[*]}; browser tests will skip"
    fi
    if [ "${#apt_get[@]}" -gt 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        lock=(-o DPkg::Lock::Timeout=300)
        say "installing ${packages[*]} with apt-get (once; later runs skip this)"
        # a failed update may still leave usable package lists from an earlier one: try the install anyway
        "${apt_get[@]}" "${lock[@]}" update -qq >/dev/null 2>&1 || say "apt-get update failed; trying the install anyway"
        if "${apt_get[@]}" "${lock[@]}" install -y -qq --no-install-recommends "${packages[@]}" >/dev/null 2>&1; then
            say "installed ${packages[*]}"
        else
            say "apt-get could not install ${packages[*]}; browser tests will skip"
        fi
    fi
fi

if ! have_playwright; then
    if [ -x "$PYTHON" ]; then
        constraints=()
        [ -f constraints.txt ] && constraints=(-c constraints.txt)
        say "installing playwright==$PLAYWRIGHT_VERSION into $PYTHON (the browser itself comes from apt)"
        if ! "$PYTHON" -m pip install -q "${constraints[@]}" "playwright==$PLAYWRIGHT_VERSION" >/dev/null 2>&1; then
            say "pip could not install playwright; browser tests will skip"
        fi
    else
        say "$PYTHON not found; run 'make install' first; browser tests will skip"
    fi
fi

if have_chromium && have_playwright; then
    say "ready: $("$CHROMIUM" --version 2>/dev/null | head -n 1), playwright $("$PYTHON" -c 'from importlib.metadata import version; print(version("playwright"))' 2>/dev/null)"
fi
exit 0
