"""A GTK 3 clipboard peer for the tests (Debian's python3-gi): reads or sets CLIPBOARD.

gtk_clipboard.py text|uris|targets     prints what GTK reads, one value per line
gtk_clipboard.py set-text TEXT          owns CLIPBOARD with TEXT, prints "ready", serves until killed
"""
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

clipboard = Gtk.Clipboard.get(Gdk.SELECTION_CLIPBOARD)
mode = sys.argv[1]
if mode == "text":
    print(clipboard.wait_for_text() or "")
elif mode == "uris":
    print("\n".join(clipboard.wait_for_uris() or []))
elif mode == "targets":
    ok, targets = clipboard.wait_for_targets()
    print("\n".join(str(target) for target in (targets if ok else [])))
elif mode == "set-text":
    clipboard.set_text(sys.argv[2], -1)
    print("ready", flush=True)
    Gtk.main()
else:
    sys.exit("unknown mode " + mode)
