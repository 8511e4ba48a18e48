from mhindex.cli import entry

entry()
