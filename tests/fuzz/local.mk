# tests/fuzz/: the fuzz targets and their seed corpus, run by tools/fuzz.sh
# (on demand and by tools/test.sh, not by make check; it builds its own copy
# under _build/).
EXTRA_DIST += tests/fuzz/fuzz_tcp_frames.c tests/fuzz/fuzz_unique_id.c tests/fuzz/fuzz_tune.c \
	tests/fuzz/fuzz_config.c tests/fuzz/fuzz_size.c tests/fuzz/corpus
