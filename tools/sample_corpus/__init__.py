"""Generator of the bundled sample study (see tools/make_sample_corpus.py)."""
