# Two commands: `make demo` and `make test`. Each creates .venv on first use and
# installs what it needs; a second run only re-installs when pyproject.toml changed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test lint unit install-dev install-run clean bench fuzz crash browser promtool slurm haproxy

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[embedded,plot]'
	@touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[embedded,plot,dev]'
	@touch $@ $(VENV)/.run-installed

install-run: $(VENV)/.run-installed
install-dev: $(VENV)/.dev-installed

demo: install-run
	$(BIN)/cnsched demo $(DEMO_ARGS)

lint: install-dev
	$(BIN)/ruff check schemas core streams sinks tests
	$(BIN)/lint-imports

# the dashboard's browser test drives Debian's Chromium (Playwright's own browser download cannot
# work offline); installed here when missing, or point CNSCHED_CHROMIUM at another Chromium
CHROMIUM := $(or $(CNSCHED_CHROMIUM),/usr/bin/chromium)
browser:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium (the dashboard's browser test)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) > /dev/null \
	  || { echo "could not install chromium: run as root with apt-get, or set CNSCHED_CHROMIUM"; exit 1; }; }

# the alert rules' test (tests/deploy/test_alerts.py) runs Prometheus's own rule checker, promtool,
# from Debian's prometheus package; installed here when missing, or point CNSCHED_PROMTOOL at one
PROMTOOL := $(or $(CNSCHED_PROMTOOL),/usr/bin/promtool)
promtool:
	@test -x $(PROMTOOL) || { echo "installing Debian's prometheus (promtool: the alert rules' test)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus) \
	  > /dev/null || { echo "could not install prometheus: run as root with apt-get, or set CNSCHED_PROMTOOL"; exit 1; }; }

# the Slurm bridge's tests run a real three-node Slurm on this machine (streams/runtime/slurm_cluster.py)
# from Debian's packages; installed here when missing (as root; without root those tests skip, saying so)
slurm:
	@command -v slurmctld > /dev/null || [ "$$(id -u)" != 0 ] || { echo "installing Debian's Slurm (the bridge's tests)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client) \
	  > /dev/null || { echo "could not install Slurm"; exit 1; }; }

# the route agent's test drives a real HAProxy through its runtime API (Debian's haproxy); installed
# here when missing (as root; without root that test skips, saying so), or point CNSCHED_HAPROXY at one
haproxy:
	@command -v $(or $(CNSCHED_HAPROXY),haproxy) > /dev/null || [ "$$(id -u)" != 0 ] || { echo "installing Debian's haproxy (the route agent's test)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy) \
	  > /dev/null || { echo "could not install haproxy"; exit 1; }; }

unit: install-dev browser promtool slurm haproxy
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the SIGKILL tests (tests/integration/test_crash_safety.py, also in `make test`) on both Kafka
# implementations, CRASH_RUNS times in a row (default 10, the bar issue 32 set); stops at the first failing run
crash: install-dev
	@rm -f crash-report.log; for i in $$(seq 1 $(or $(CRASH_RUNS),10)); do \
	  CRASH_REPORT=$(CURDIR)/crash-report.log $(BIN)/python -m pytest -q -m crash \
	    tests/integration/test_crash_safety.py || { echo "run $$i failed"; cat crash-report.log; exit 1; }; \
	  echo "run $$i passed"; done; cat crash-report.log

test: lint unit

# 100,000 hostile messages over every input topic through a real worker and sink (a smaller campaign
# runs in `make test`); exits non-zero on a crash, a vanished message or an inexact window
fuzz: install-dev
	$(BIN)/cnsched fuzz --messages $(or $(FUZZ_MESSAGES),100000) $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
