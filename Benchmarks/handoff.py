"""A GTK 3 app that copies N bytes of text and exits with a hand-off to the clipboard manager.

handoff.py FILE   sets CLIPBOARD to the file's text, marks it storable, then after 200 ms calls
                  gtk_clipboard_store (what GTK apps do as they quit) and prints the seconds it took
"""
import sys
import time

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, GLib, Gtk  # noqa: E402

with open(sys.argv[1], encoding="utf-8") as source:
    text = source.read()
clipboard = Gtk.Clipboard.get(Gdk.SELECTION_CLIPBOARD)
clipboard.set_text(text, -1)
clipboard.set_can_store(None)


def leave():
    start = time.monotonic()
    clipboard.store()
    print("%.4f" % (time.monotonic() - start), flush=True)
    Gtk.main_quit()
    return False


GLib.timeout_add(200, leave)
Gtk.main()
