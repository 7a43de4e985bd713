#ifndef XPB_CXLIBQUEUE_H
#define XPB_CXLIBQUEUE_H

// Calls into Xlib's internals, kept out of CX11: Xlibint.h completes the Display type, which
// would change how Swift sees every Display pointer. The display is passed as an opaque pointer.

/// Frees the nodes Xlib keeps for reuse once its queued events are handled (Display's free list)
/// and hands free memory back to the system; returns how many nodes were freed. Only on the one
/// thread that uses the display.
unsigned long cxlibqueue_release_free_list(void *display);

/// The bits of a resource id that a client numbers its own resources with: two windows whose
/// ids agree outside them belong to one client.
unsigned long cxlibqueue_resource_mask(void *display);

#endif
