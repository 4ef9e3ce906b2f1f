"""Developer tools: tiny random-weight models built offline for tests and ``conf/tiny.yaml``."""
