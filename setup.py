"""Build the Cython extensions in ``_ext/``.

Each ``_ext/<source>.pyx`` is compiled into the importable module named in EXTENSIONS.  The
pure-Python packages never require the compiled modules: every kernel has a numpy reference
implementation that is used when the extension is missing (see ``accounting/_native.py``).
"""
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

EXTENSIONS = {
    # module name                     source file
    "accounting._kernels": "_ext/accounting_kernels.pyx",
    "vflpriv.kernels._noisy_argmax": "_ext/noisy_argmax.pyx",
    "vflpriv.kernels._sketch": "_ext/sketch.pyx",
}

extensions = [
    Extension(name, [src], include_dirs=[np.get_include()],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
              extra_compile_args=["-O3"])
    for name, src in EXTENSIONS.items()
]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"boundscheck": False, "wraparound": False,
                                                 "cdivision": True}))
