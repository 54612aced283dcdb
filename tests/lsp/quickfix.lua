-- Neovim as the client of `electra-detect lsp` (tests/test_lsp_neovim.py runs it), with only the 0.7 API:
-- vim.lsp.start_client, vim.lsp.buf_request_sync, vim.lsp.util.apply_workspace_edit.
--
--   ELECTRA_DETECT_NVIM_CMD='["electra-detect", "lsp"]' ELECTRA_DETECT_NVIM_FILE=notes.md \
--   ELECTRA_DETECT_NVIM_OUT=out.json nvim --headless --clean -i NONE -n -c "luafile tests/lsp/quickfix.lua"
--
-- Opens the Markdown file, waits for the server's diagnostics, asks for the code actions of the first one, applies
-- the first quick fix that edits the buffer, stops the server, and writes what it saw to ELECTRA_DETECT_NVIM_OUT as
-- JSON (the test decides what is right); it always exits, writing the error when something failed.

local out_path = os.getenv("ELECTRA_DETECT_NVIM_OUT")
local timeout_ms = tonumber(os.getenv("ELECTRA_DETECT_NVIM_TIMEOUT_MS") or "300000")
local seen = { published = {}, messages = {}, actions = {}, nvim = vim.version() }

local function finish(error_message)
  seen.error = error_message
  vim.fn.writefile({ vim.fn.json_encode(seen) }, out_path)
  vim.cmd("qall!")
end

local function run()
  local cmd = vim.fn.json_decode(os.getenv("ELECTRA_DETECT_NVIM_CMD"))
  local file = os.getenv("ELECTRA_DETECT_NVIM_FILE")
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.bo[bufnr].filetype = "markdown" -- the languageId Neovim sends

  local exited = nil
  local client_id = vim.lsp.start_client({
    name = "electra-detect",
    cmd = cmd,
    root_dir = vim.fn.fnamemodify(file, ":p:h"),
    handlers = {
      ["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
        table.insert(seen.published, result)
        return vim.lsp.handlers["textDocument/publishDiagnostics"](err, result, ctx, config)
      end,
      ["window/showMessage"] = function(_, result)
        table.insert(seen.messages, result.message)
      end,
    },
    on_exit = function(code, signal)
      exited = { code = code, signal = signal }
    end,
  })
  if not client_id then
    return finish("vim.lsp.start_client failed")
  end
  vim.lsp.buf_attach_client(bufnr, client_id)

  if not vim.wait(timeout_ms, function() return #seen.published > 0 end, 100) then
    return finish("no diagnostics within " .. timeout_ms .. " ms")
  end
  local diagnostics = seen.published[#seen.published].diagnostics
  seen.diagnostics = diagnostics
  if #diagnostics > 0 then
    local params = {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      range = diagnostics[1].range,
      context = { diagnostics = { diagnostics[1] } },
    }
    local responses, err = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, 60000)
    if not responses then
      return finish("textDocument/codeAction failed: " .. tostring(err))
    end
    local fix = nil
    for _, response in pairs(responses) do
      for _, action in ipairs(response.result or {}) do
        table.insert(seen.actions, action.title)
        if fix == nil and action.edit ~= nil then
          fix = action
        end
      end
    end
    if fix ~= nil then
      seen.applied = fix.title
      vim.lsp.util.apply_workspace_edit(fix.edit, vim.lsp.get_client_by_id(client_id).offset_encoding)
    end
  end
  seen.lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)

  vim.lsp.stop_client(client_id)
  vim.wait(30000, function() return exited ~= nil end, 100)
  seen.exit = exited
  finish(nil)
end

local ok, error_message = pcall(run)
if not ok then
  finish("the script failed: " .. tostring(error_message))
end
