"""Build the Cython extensions in ``_ext/``.

Each ``_ext/<source>.pyx`` is compiled into the importable module named in EXTENSIONS.  The
pure-Python packages never require the compiled modules: every kernel has a numpy reference
implementation that is used when the extension is missing (see ``accounting/_native.py``).

An editable install (``pip install -e ".[extra]"``) builds in fresh temporary directories, so
without help every install compiles the three kernels again.  :class:`CachedBuildExt` keeps each
compiled module in ``build/ext-cache/<key>/`` (``build/`` is ignored by git), the key a hash of
everything the binary depends on: the ``.pyx`` source, Cython's version and directives, the
compile options, numpy's version (its headers) and the interpreter's version, ABI suffix and
platform (not the generated C, which names the temporary build environment's paths).  A later build with the
same key copies the module instead of compiling it; any change to a source, an option or a
version compiles anew.  ``VFLPRIV_NO_EXT_CACHE=1`` compiles every time (and stores nothing).
"""
import hashlib
import os
import platform
import shutil
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

EXTENSIONS = {
    # module name                     source file
    "accounting._kernels": "_ext/accounting_kernels.pyx",
    "vflpriv.kernels._noisy_argmax": "_ext/noisy_argmax.pyx",
    "vflpriv.kernels._sketch": "_ext/sketch.pyx",
}

DIRECTIVES = {"boundscheck": False, "wraparound": False, "cdivision": True}

#: where compiled modules are kept between builds (inside the project's ignored build/)
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build", "ext-cache")


def ext_key(ext, numpy_version, cython_version):
    """The hash of what the compiled ``ext`` depends on: its ``.pyx`` bytes (not paths: an
    isolated build's numpy include path changes every time, numpy's version does not)."""
    h = hashlib.sha256()
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), EXTENSIONS[ext.name]),
              "rb") as fh:
        h.update(hashlib.sha256(fh.read()).digest())
    for part in (ext.name, sorted(DIRECTIVES.items()), sorted(ext.define_macros or []),
                 ext.extra_compile_args, ext.extra_link_args, ext.libraries, numpy_version,
                 cython_version, sys.version,
                 sysconfig.get_config_var("EXT_SUFFIX"), sysconfig.get_platform(),
                 platform.machine(), sysconfig.get_config_var("CC")):
        h.update(repr(part).encode())
    return h.hexdigest()[:32]


class CachedBuildExt(build_ext):
    """``build_ext`` that copies an extension from :data:`CACHE` when its key is there."""

    def build_extension(self, ext):
        if os.environ.get("VFLPRIV_NO_EXT_CACHE"):
            return super().build_extension(ext)
        import Cython
        import numpy

        target = self.get_ext_fullpath(ext.name)
        key = ext_key(ext, numpy.__version__, Cython.__version__)
        cached = os.path.join(CACHE, key, os.path.basename(target))
        if os.path.isfile(cached):
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copy2(cached, target)
            print(f"vflpriv: {ext.name} unchanged since an earlier build: copied from {cached}")
            return None
        result = super().build_extension(ext)
        try:                                  # a cache that cannot be written only costs time
            os.makedirs(os.path.dirname(cached), exist_ok=True)
            shutil.copy2(target, cached + ".part")
            os.replace(cached + ".part", cached)
        except OSError:
            pass
        return result


def extensions():
    import numpy as np
    from Cython.Build import cythonize

    exts = [
        Extension(name, [src], include_dirs=[np.get_include()],
                  define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                  extra_compile_args=["-O3"])
        for name, src in EXTENSIONS.items()
    ]
    return cythonize(exts, language_level=3, compiler_directives=DIRECTIVES)


if __name__ == "__main__":
    setup(ext_modules=extensions(), cmdclass={"build_ext": CachedBuildExt})
