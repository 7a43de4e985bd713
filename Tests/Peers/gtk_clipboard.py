"""A GTK 3 clipboard peer for the tests (Debian's python3-gi): reads or sets CLIPBOARD.

gtk_clipboard.py text|uris|targets     prints what GTK reads, one value per line
gtk_clipboard.py image-diff FILE        reads the clipboard's image (wait_for_image) and prints "size W H" and
                                        "maxdiff N": the largest difference of an RGBA channel against FILE
                                        as GdkPixbuf decodes it
gtk_clipboard.py pixel-diff A B         no clipboard: decodes two image files with GdkPixbuf (an
                                        independent decoder) and prints "size W H" of A and "maxdiff N"
gtk_clipboard.py set-text TEXT          owns CLIPBOARD with TEXT, prints "ready", serves until killed
gtk_clipboard.py set-text-window TEXT   the same from an app with a window on screen (WM_CLASS set by GTK)
gtk_clipboard.py window TITLE            a window on screen that copies nothing, prints "ready", runs until
                                        killed (on X or on Wayland, as GDK_BACKEND says)
gtk_clipboard.py set-text-file FILE     the same with the UTF-8 text of FILE (larger than an argument may be)
gtk_clipboard.py set-text-and-exit TEXT MS
                                        the same with text (GTK offers it as UTF8_STRING, COMPOUND_TEXT,
                                        TEXT, STRING and two text/plain)
gtk_clipboard.py set-text-view TEXT      copies TEXT from a GtkTextView's buffer, as Mousepad does (GTK offers
                                        its rich-text serialisation, application/x-gtk-text-buffer-rich-text,
                                        beside the text targets), prints "ready", serves until killed
gtk_clipboard.py set-text-and-clear TEXT MS
                                        owns CLIPBOARD with TEXT, prints "ready", MS milliseconds later
                                        clears it (gtk_clipboard_clear), prints "cleared", serves on
gtk_clipboard.py owner-changes          reads nothing: prints "ready", then "owner-change" each time GTK reports
                                        a new owner of CLIPBOARD (XFixes), until killed
gtk_clipboard.py one-paste-many-asks     asks TARGETS twice, then UTF8_STRING and STRING, from one window
                                        (one paste), and prints the two texts
gtk_clipboard.py target-text TARGET     reads TARGET and prints the text GTK decodes from it (its own
                                        converters: Xlib's for COMPOUND_TEXT, Latin-1 for STRING)
gtk_clipboard.py set-image-and-exit PNG MS
                                        owns CLIPBOARD with the image (GTK offers it as PNG, BMP, TIFF ...),
                                        prints "ready", MS milliseconds later hands the clipboard to
                                        the clipboard manager (gtk_clipboard_store), prints
                                        "stored SECONDS" and exits
"""
import os
import sys

if sys.argv[1:2] == ["target-text"]:
    # Xlib decodes COMPOUND_TEXT into the locale's encoding, and GTK from there into UTF-8.
    os.environ["LC_ALL"] = "C.UTF-8"

import gi  # noqa: E402

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, Gtk  # noqa: E402

clipboard = Gtk.Clipboard.get(Gdk.SELECTION_CLIPBOARD)
mode = sys.argv[1]


def rgba(pixbuf):
    """The pixels as RGBA bytes, rows without padding."""
    if not pixbuf.get_has_alpha():
        pixbuf = pixbuf.add_alpha(False, 0, 0, 0)
    width, height, stride = pixbuf.get_width(), pixbuf.get_height(), pixbuf.get_rowstride()
    data = pixbuf.get_pixels()
    return b"".join(data[row * stride:row * stride + width * 4] for row in range(height))


def diff(a, b):
    """Prints a's size and the largest channel difference between two pixbufs (-1: sizes differ)."""
    print("size", a.get_width(), a.get_height())
    if (a.get_width(), a.get_height()) != (b.get_width(), b.get_height()):
        print("maxdiff -1")
        return
    print("maxdiff", max((abs(x - y) for x, y in zip(rgba(a), rgba(b))), default=0))


if mode in ("image-diff", "pixel-diff"):
    from gi.repository import GdkPixbuf  # noqa: E402

if mode == "image-diff":
    image = clipboard.wait_for_image()
    if image is None:
        sys.exit("no image")
    diff(image, GdkPixbuf.Pixbuf.new_from_file(sys.argv[2]))
elif mode == "pixel-diff":
    diff(GdkPixbuf.Pixbuf.new_from_file(sys.argv[2]), GdkPixbuf.Pixbuf.new_from_file(sys.argv[3]))
elif mode == "text":
    print(clipboard.wait_for_text() or "")
elif mode == "uris":
    print("\n".join(clipboard.wait_for_uris() or []))
elif mode == "targets":
    ok, targets = clipboard.wait_for_targets()
    print("\n".join(str(target) for target in (targets if ok else [])))
elif mode in ("set-text", "set-text-window", "set-text-file"):
    if mode == "set-text-window":
        window = Gtk.Window(title="peer")
        window.show_all()
    if mode == "set-text-file":
        with open(sys.argv[2], encoding="utf-8") as source:
            clipboard.set_text(source.read(), -1)
    else:
        clipboard.set_text(sys.argv[2], -1)
    print("ready", flush=True)
    Gtk.main()
elif mode == "window":
    window = Gtk.Window(title=sys.argv[2])
    window.show_all()
    print("ready", flush=True)
    Gtk.main()
elif mode == "set-text-view":
    buffer = Gtk.TextBuffer()
    buffer.set_text(sys.argv[2], -1)
    buffer.select_range(buffer.get_start_iter(), buffer.get_end_iter())
    buffer.copy_clipboard(clipboard)
    print("ready", flush=True)
    Gtk.main()
elif mode == "target-text":
    data = clipboard.wait_for_contents(Gdk.Atom.intern(sys.argv[2], False))
    if data is None:
        sys.exit("no " + sys.argv[2])
    print(data.get_text())
elif mode in ("set-text-and-exit", "set-image-and-exit"):
    import time

    if mode == "set-text-and-exit":
        clipboard.set_text(sys.argv[2], -1)
    else:
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
elif mode == "one-paste-many-asks":
    # One paste as some apps make it: TARGETS twice, then two text targets; prints both texts.
    clipboard.wait_for_targets()
    clipboard.wait_for_targets()
    for target in ("UTF8_STRING", "STRING"):
        data = clipboard.wait_for_contents(Gdk.Atom.intern(target, False))
        print(data.get_text() if data is not None else "(none)")
elif mode == "owner-changes":
    # What a browser watches to know that the clipboard changed (it reads again only then).
    def changed(_clipboard, _event):
        print("owner-change", flush=True)

    clipboard.connect("owner-change", changed)
    print("ready", flush=True)
    Gtk.main()
elif mode == "set-text-and-clear":
    # A password manager that marks nothing: it copies, then empties the clipboard itself.
    from gi.repository import GLib  # noqa: E402

    clipboard.set_text(sys.argv[2], -1)
    print("ready", flush=True)

    def clear():
        clipboard.clear()
        print("cleared", flush=True)
        return False

    GLib.timeout_add(int(sys.argv[3]), clear)
    Gtk.main()
else:
    sys.exit("unknown mode " + mode)
