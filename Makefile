# The two commands of the README: `make demo` and `make test`.
# Each creates .venv if missing and installs exactly the versions in constraints.txt.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-cluster test-all test-durations test-costs golden clean browser-deps office-deps

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e ".[all]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/kb-ray demo

# Two pytest-xdist workers, a test file per worker at a time (its module fixtures built once): 661 s
# against 990 s in one process, fresh clone on 2 vCPUs (#41). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

# S3 on a local moto server and a 2-node Ray cluster (`cluster` marker), and `slow` tests: CI runs these after `test`.
CLUSTER_TIER := -m "(cluster or slow) and not gpu and not benchmark"
test-cluster: $(STAMP)
	$(PY) -m pytest -q $(CLUSTER_TIER)

# The 30 slowest tests (setup, call and teardown each) of `make test`; TIER=cluster for those of `make test-cluster`.
test-durations: $(STAMP)
	$(PY) -m pytest -q --durations=30 $(if $(filter cluster,$(TIER)),$(CLUSTER_TIER))

# Seconds per test file and the expensive things each started (Ray, Serve, ingests, models, Postgres,
# Chromium): tests/cost_plugin.py writes the table to COSTS (default .kb/test_costs.md); TIER=cluster as above.
COSTS ?= .kb/test_costs.md
test-costs: $(STAMP)
	KB_RAY_TEST_COSTS=$(COSTS) $(PY) -m pytest -q -p tests.cost_plugin $(if $(filter cluster,$(TIER)),$(CLUSTER_TIER))

test-all: $(STAMP)
	$(PY) -m pytest -q -m "not gpu"

golden: $(STAMP)
	$(PY) golden/make_golden.py
	GEN_TEST_DATA=1 $(PY) -m pytest -q tests/golden
	@echo "Snapshots regenerated: review 'git diff golden/', then run 'make test' (GEN_TEST_DATA must be unset)."

# Headless Chromium and its WebDriver for tests/serving/test_viewer_browser.py (skipped, with the
# reason, where they are missing). Debian/Ubuntu, as root; .ci/run calls it.
browser-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "chromium and chromedriver are installed"; \
	else \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

# LibreOffice Impress without its GUI (about 80 MB of packages, 244 MB installed) for the viewer's PPTX
# page images (kb_ray/pages/slides.py) and their tests (skipped, with the reason, where soffice is
# missing). Debian/Ubuntu, as root; .ci/run calls it.
office-deps:
	@if command -v soffice >/dev/null; then \
		echo "soffice is installed"; \
	else \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libreoffice-impress-nogui; \
	fi

clean:
	rm -rf $(VENV) .kb .pytest_cache
