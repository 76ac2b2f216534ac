# Sanitizer and fuzzing jobs (tools/sanitize.sh, tools/fuzz.sh): run on
# demand, not by make check; they build their own copies under _build/.
EXTRA_DIST += tools/sanitize.sh tools/fuzz.sh \
	tools/sanitizers/lsan.supp tools/sanitizers/ubsan.supp tools/sanitizers/tsan.supp \
	tools/sanitizers/criterion_tsan.c \
	tests/fuzz/fuzz_tcp_frames.c tests/fuzz/fuzz_unique_id.c tests/fuzz/fuzz_tune.c \
	tests/fuzz/fuzz_config.c tests/fuzz/fuzz_size.c tests/fuzz/corpus
