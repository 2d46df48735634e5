# The two commands of README.md:
#   make demo   install deps, build, run the main job
#   make check  install deps, build, run the whole test suite (plain + ASan/UBSan + TSan + fuzz)
#   make check-quick  static checks, the build's symbol and circle checks, the unit tests
#   make coverage     line coverage per source folder from the unit tests (gcc --coverage, gcov)
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO ?= $(BUILD)/perf/rs-shuffle-bench

PREFIX ?= /usr/local
# make install's own build: Release, no tests, no fault-injection hooks.
INSTALL_BUILD ?= build-release

.PHONY: demo check check-quick coverage deps build install format format-check layering-check clean

deps:
	scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRS_WERROR=ON
	cmake --build $(BUILD) -j$(JOBS)

# make install PREFIX=/opt/rshuffle: the library, headers, programs, docs,
# man pages, rshuffle.pc and CMake package, from a build for use (never the
# test build: it carries fault-injection hooks, and its install is refused).
install: deps
	scripts/install-build $(INSTALL_BUILD) $(PREFIX) $(JOBS)

demo: build
	$(DEMO)

check:
	scripts/install-deps check
	scripts/check

check-quick:
	scripts/install-deps check
	scripts/check quick

# Not part of check: a build of its own (build-coverage). CTEST_ARGS picks the tests.
coverage:
	JOBS=$(JOBS) scripts/coverage $(CTEST_ARGS)

format:
	scripts/check-format --fix

format-check:
	scripts/check-format

layering-check:
	scripts/check-layering

clean:
	rm -rf build build-asan build-tsan build-fuzz build-coverage $(INSTALL_BUILD)
