"""Test fixtures, not shipped in the package: local servers speaking the OpenAI
and Anthropic wire formats (``support.servers``) and a throwaway PostgreSQL
cluster (``support.postgres``). The tests import them with ``tests/`` on
``sys.path`` (pytest's rootdir conftest puts it there); benches/conftest.py
adds it for the benchmarks."""
