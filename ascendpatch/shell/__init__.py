"""The shell: the command line, argument parsing, the renderer, completion and the
crash log. Core code never imports it (tests/test_layout.py); it reports through
ascendpatch.progress, the seam the shell listens on."""
