#ifndef XPB_CXEVENTS_H
#define XPB_CXEVENTS_H

// The connection's event side, kept out of CX11: XCB owns the event queue (Xlib's would read
// everything the server has sent before handing back one event), and Xlibint.h completes the
// Display type, which would change how Swift sees every Display pointer. The display is passed
// as an opaque pointer; every call is for the one thread that uses the display.

#include <stdint.h>

/// One event or error, decoded from the wire into fixed fields (32 bytes, no allocation).
typedef struct {
    /// The protocol's event code without the sent-by-SendEvent bit; 0 for an error.
    uint8_t kind;
    /// PropertyNotify: the state; an XFixes selection event: its subtype; an error: its code.
    uint8_t detail;
    /// An error: the major opcode of the request that failed.
    uint8_t major;
    /// Whether a client sent the event (SendEvent) rather than the server.
    uint8_t sent;
    /// An error: the minor opcode.
    uint16_t minor;
    uint16_t unused;
    /// The low 32 bits of the serial of the last request the server had processed (for an error,
    /// the failed request's).
    uint32_t sequence;
    uint32_t time;
    /// SelectionRequest/SelectionNotify: the requestor; SelectionClear: the owner;
    /// PropertyNotify and DestroyNotify: the window; XFixes: the window that asked for the
    /// event; an error: the bad resource id.
    uint32_t window;
    /// SelectionRequest and XFixes: the owner.
    uint32_t owner;
    uint32_t selection;
    uint32_t target;
    /// The property (PropertyNotify: the atom that changed).
    uint32_t property;
} cxevents_event;

/// Hands the event queue to XCB: from now on Xlib reads only replies, events come out of
/// cxevents_next one at a time, and the errors of requests without a reply wait in XCB for
/// cxevents_poll_error (or for Xlib's next round trip, which hands them to its error handler).
void cxevents_take_queue(void *display);

/// Takes the next event into `out`: one XCB has already read, else (with `read` non-zero) one
/// from a read of the connection. Returns 1 with an event, 0 without, -1 when the connection
/// has failed. `fixes_event_base` (or -1) tells XFixes' selection event apart.
/// Conversion requests of `skip_requestor` (a flooder's window, or 0 for none) are freed on the
/// way, unseen, and counted in `*skipped`; at `skip_limit` of them it returns 0. A flood's events
/// then cost a pop and a free, well under what the server spends sending each: the owner reads a
/// flood faster than it comes, whatever share of the processor it gets.
int cxevents_next(void *display, int read, int fixes_event_base, uint32_t skip_requestor, int skip_limit,
                  int *skipped, cxevents_event *out);

/// Whether the request `serial` (sent by Xlib, which asks XCB to keep its errors) failed: 0 while
/// XCB has not read that far, 1 when it succeeded (or its error was taken already, by Xlib for a
/// request with a reply), 2 when it failed, with the error in `out`.
int cxevents_poll_error(void *display, unsigned long serial, cxevents_event *out);

/// Interns `count` names in one round trip through XCB: every request goes out before the first
/// reply is read (Xlib's XInternAtoms does the same at several times the cost per name). `names`
/// holds them back to back, each ended by its NUL (one buffer: no C string made per name). With
/// `only_if_exists`, an unknown name gets 0 and no atom is made. Returns 1 when every request was
/// answered, 0 when any failed (its atom is 0).
int cxevents_intern_atoms(void *display, const char *names, int count, int only_if_exists, uint32_t *atoms);

/// Sends GetSelectionOwner for `selection` without waiting (with the next flush) and returns its
/// sequence number, for cxevents_selection_owner_reply or cxevents_discard_reply.
uint32_t cxevents_selection_owner_request(void *display, uint32_t selection);
/// The owner's window (0 for none) the server answered to the request `sequence`; sets *ok to 0
/// when no answer came (the connection failed).
uint32_t cxevents_selection_owner_reply(void *display, uint32_t sequence, int *ok);
/// Sends GetProperty for `property` of `window` (at most `max_values` 32-bit units, never
/// deleted) without waiting, and returns its sequence number, for cxevents_cardinals_reply or
/// cxevents_discard_reply: a read placed before requests sent after it, its answer taken later.
uint32_t cxevents_property_request(void *display, uint32_t window, uint32_t property, uint32_t max_values);
/// The values of a format-32 CARDINAL property asked for by cxevents_property_request (at most
/// `max_values`, copied to `values`): their number, or -1 when the property is absent, of another
/// type or format, or no answer came (the window is gone, or the connection failed).
int cxevents_cardinals_reply(void *display, uint32_t sequence, uint32_t *values, int max_values);
/// Drops the answer to the request `sequence` unread.
void cxevents_discard_reply(void *display, uint32_t sequence);

/// Hands free heap memory back to the system, after a flood's peak has been handled.
void cxevents_trim(void);

/// The bits of a resource id that a client numbers its own resources with: two windows whose
/// ids agree outside them belong to one client.
unsigned long cxevents_resource_mask(void *display);

#endif
