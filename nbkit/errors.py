"""The exceptions nbkit raises: one base class, one subclass per kind of mistake."""


class NbkitError(Exception):
    """Base class of every error nbkit raises on purpose."""


class ParameterError(NbkitError, ValueError):
    """A notebook parameter has a value nbkit cannot use."""


class BackendError(NbkitError, RuntimeError):
    """Keras (or JAX) was already set up in this process in a way that conflicts with the request."""


class AcceleratorError(NbkitError, RuntimeError):
    """The requested accelerator cannot be found or initialized."""


class DataError(NbkitError, OSError):
    """Input data is missing, unreadable or not in the expected format."""


class ResumeError(NbkitError, RuntimeError):
    """A training checkpoint cannot be resumed: unreadable, incomplete, or made with other settings."""


class PackageError(NbkitError, OSError):
    """A model package is missing, incomplete, of another format version, or does not fit the data."""


class SecretError(NbkitError, LookupError):
    """A secret is missing or cannot be read; the message says where to put it, never its value."""


class LeakError(NbkitError, ValueError):
    """A notebook or bundle contains a secret value or a credential-shaped string."""


class BundleError(NbkitError, ValueError):
    """A kernel bundle cannot be built from the given notebook and options."""


class PushError(NbkitError, RuntimeError):
    """The kaggle CLI could not push a bundle or report its status."""
