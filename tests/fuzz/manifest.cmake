# fuzz_manifest: every broadcast decoder (descriptor, request, reply, news,
# destroy). Included by tests/fuzz/CMakeLists.txt in RS_FUZZ (clang
# libFuzzer) builds; other builds replay it from tests/broadcast.
add_executable(fuzz_manifest ${CMAKE_CURRENT_LIST_DIR}/fuzz_manifest.c)
target_link_libraries(fuzz_manifest PRIVATE rshuffle_internal)
target_link_options(fuzz_manifest PRIVATE -fsanitize=fuzzer)
add_executable(gen_manifest_corpus ${CMAKE_CURRENT_LIST_DIR}/gen_manifest_corpus.c
               ${CMAKE_CURRENT_LIST_DIR}/manifest_corpus.c)
target_link_libraries(gen_manifest_corpus PRIVATE rshuffle_internal)

set(manifest_corpus_dir ${CMAKE_CURRENT_BINARY_DIR}/corpus_manifest)
add_test(NAME fuzz_manifest_corpus COMMAND gen_manifest_corpus ${manifest_corpus_dir})
set_tests_properties(fuzz_manifest_corpus PROPERTIES LABELS fuzz TIMEOUT 30
                     FIXTURES_SETUP corpus_manifest)
add_test(NAME fuzz_manifest
         COMMAND fuzz_manifest -max_total_time=20 -timeout=10 -rss_limit_mb=2048
                 -print_final_stats=1
                 -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/crash-manifest- ${manifest_corpus_dir})
set_tests_properties(fuzz_manifest PROPERTIES LABELS fuzz TIMEOUT 90
                     FIXTURES_REQUIRED corpus_manifest)
