#ifndef XPB_CX11_H
#define XPB_CX11_H

// The one C surface the X11 backend sees: Xlib, its atom and utility headers, and XFixes
// (selection-owner change events). Shims are prefixed cx11_ and each says why it exists.
#include <X11/Xlib.h>
#include <X11/Xatom.h>
#include <X11/Xutil.h>
#include <X11/extensions/Xfixes.h>

#endif
