"""Adapters to other frameworks. Each submodule imports its framework only when it is itself imported
(`import mlalpha` needs none of them): mlalpha.contrib.qlib needs pyqlib."""
