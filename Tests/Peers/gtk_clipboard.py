"""A GTK 3 clipboard peer for the tests (Debian's python3-gi): reads or sets CLIPBOARD.

gtk_clipboard.py text|uris|targets     prints what GTK reads, one value per line
gtk_clipboard.py set-text TEXT          owns CLIPBOARD with TEXT, prints "ready", serves until killed
gtk_clipboard.py set-image-and-exit PNG MS
                                        owns CLIPBOARD with the image (GTK offers it as PNG, BMP, TIFF ...),
                                        prints "ready", MS milliseconds later hands the clipboard to
                                        the clipboard manager (gtk_clipboard_store), prints
                                        "stored SECONDS" and exits
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
elif mode == "set-image-and-exit":
    import time

    from gi.repository import GdkPixbuf  # noqa: E402

    clipboard.set_image(GdkPixbuf.Pixbuf.new_from_file(sys.argv[2]))
    clipboard.set_can_store(None)
    print("ready", flush=True)

    def leave():
        start = time.monotonic()
        clipboard.store()
        print("stored %.3f" % (time.monotonic() - start), flush=True)
        Gtk.main_quit()
        return False

    from gi.repository import GLib  # noqa: E402

    GLib.timeout_add(int(sys.argv[3]), leave)
    Gtk.main()
else:
    sys.exit("unknown mode " + mode)
