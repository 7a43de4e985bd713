"""Unlocks gnome-keyring-daemon's login collection with its password, as a login does, without a
prompt: the Secret Service's plain session, then gnome-keyring's UnlockWithMasterPassword, in
one connection to the session bus. Usage: keyring_unlock.py PASSWORD"""
import sys

from gi.repository import Gio, GLib

SERVICE = "org.freedesktop.secrets"
ROOT = "/org/freedesktop/secrets"
LOGIN = ROOT + "/collection/login"

bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
opened = bus.call_sync(SERVICE, ROOT, "org.freedesktop.Secret.Service", "OpenSession",
                       GLib.Variant("(sv)", ("plain", GLib.Variant("s", ""))), None, Gio.DBusCallFlags.NONE, 5000, None)
session = opened.unpack()[1]
bus.call_sync(SERVICE, ROOT, "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface", "UnlockWithMasterPassword",
              GLib.Variant("(o(oayays))", (LOGIN, (session, b"", sys.argv[1].encode(), "text/plain"))),
              None, Gio.DBusCallFlags.NONE, 5000, None)
locked = bus.call_sync(SERVICE, LOGIN, "org.freedesktop.DBus.Properties", "Get",
                       GLib.Variant("(ss)", ("org.freedesktop.Secret.Collection", "Locked")), None, Gio.DBusCallFlags.NONE, 5000, None)
if locked.unpack()[0]:
    sys.exit("the login collection is still locked")
print("unlocked")
