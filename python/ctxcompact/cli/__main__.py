"""``python -m ctxcompact.cli``: the ctxcompact command."""

from ctxcompact.cli import main

main()
