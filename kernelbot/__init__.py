"""kernelbot: keeps GPU code fast in every pull request."""

__version__ = "0.1.0"
