"""Development tooling for dayzero's own tests, bench and set-up; not part of the installed package.

- `testbed`: real OpenSSH servers on loopback (`tools/testbed`), the SSH transport's test hosts;
- `stub`: a stub OpenAI-compatible streaming server, the stand-in engine of tests and bench;
- `engine_build`: the llama-server build and the SmolLM2 model fetch (`tools/build-engine`);
- `browser`: headless Chromium over CDP, to check a report as a reader sees it;
- `postgres`: a throwaway PostgreSQL server, the history store's shared-database tests.

Importable with `<repo>/tools` on `sys.path` (tests/conftest.py and the tools/ scripts add it).
"""
