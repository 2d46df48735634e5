# The two commands of README.md:
#   make demo   install deps, build, run the main job
#   make check  install deps, build, run the whole test suite (plain + ASan/UBSan + fuzz)
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO ?= $(BUILD)/perf/rs-shuffle-bench

.PHONY: demo check deps build format format-check layering-check clean

deps:
	scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(DEMO)

check: deps
	scripts/check

format:
	scripts/check-format --fix

format-check:
	scripts/check-format

layering-check:
	scripts/check-layering

clean:
	rm -rf build build-asan build-fuzz
