"""Research commands behind `cogfeed synth|convert|bench|tune|experiment|demo`.

Each module has main(argv) -> exit status; cogfeed.cli dispatches to them.
"""
