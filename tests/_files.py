"""What the hostile-input tests compare before and after a refused command (not a test module)."""
import os
import stat


def snapshot(root):
    """Every file and folder under ``root``: a file's bytes, anything else (a FIFO, a device, a
    folder) by its type only."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in files + dirs:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (open(path, "rb").read()
                                                if stat.S_ISREG(st.st_mode)
                                                else stat.S_IFMT(st.st_mode))
    return out


def message_lines(err):
    """The lines of ``err`` that are not warnings."""
    return [ln for ln in err.splitlines() if ln.strip() and ": warning: " not in ln]
