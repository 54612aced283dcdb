# Two commands set up a fresh machine: `make quickstart` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# 9 minutes of pre-training leave room for the shipped model's one-time ONNX export (about a minute here)
QUICKSTART_MINUTES ?= 9
QUICKSTART_STEPS ?= 1000
QUICKSTART_SENTENCES := "The committee have decided to postpone the the meeting until next week." \
	"We must strengthen our economy and protect our nation." \
	"He go to the store yesterday and buyed three apple."

.PHONY: install browser neovim quickstart test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Torch first, from its pin (a local CPU wheel here), then everything else with torch held fixed.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

quickstart: install
	$(BIN)/electra-detect pretrain --preset tiny --out runs/quickstart --overwrite \
		--max-steps $(QUICKSTART_STEPS) --max-minutes $(QUICKSTART_MINUTES)
	@echo; echo "== the model just pre-trained from scratch (runs/quickstart: at most $(QUICKSTART_STEPS) steps," \
		"$(QUICKSTART_MINUTES) min on this machine)"
	$(BIN)/electra-detect score --model runs/quickstart $(QUICKSTART_SENTENCES)
	@echo; echo "== the detector the project ships (models/electra-minilm/ged: trained on learner essays; its" \
		"first use exports it to ONNX once): flagged words, their ERRANT operation and type, suggestions"
	$(BIN)/electra-detect ged --suggest --model models/electra-minilm $(QUICKSTART_SENTENCES)

# Debian chromium + Playwright for the browser tests; never fails (those tests skip, saying why).
browser: install
	bash scripts/install_browser.sh $(BIN)/python

# Debian's neovim for the editor test (tests/test_lsp_neovim.py); never fails (that test skips, saying why).
neovim:
	bash scripts/install_neovim.sh

# Two workers share the cores; the browser tests then run alone, since their waits assume an idle CPU.
test: install browser neovim
	$(BIN)/python -m pytest -q -n auto -m "not serial"
	$(BIN)/python -m pytest -q -m serial

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python -m benchmarks.speed.pretrain_speed

clean:
	rm -rf $(VENV) runs .pytest_cache
