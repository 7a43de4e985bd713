// Xlib keeps the nodes of its event queue on a free list once they are handled, for reuse, and
// frees them only with the display: after a flood of events (millions of SelectionRequests read
// while the owner waited for one reply) the process would keep that peak of memory for good. No
// public call empties the list, so this walks Display's own field (Xlibint.h).
#include <X11/Xlibint.h>
#include <malloc.h>

#include "CXlibQueue.h"

unsigned long cxlibqueue_release_free_list(void *opaque) {
    Display *display = opaque;
    unsigned long released = 0;
    struct _XSQEvent *node = display->qfree;
    while (node) {
        struct _XSQEvent *next = node->next;
        Xfree(node);
        node = next;
        released += 1;
    }
    display->qfree = NULL;
    if (released > 0) malloc_trim(0);
    return released;
}

unsigned long cxlibqueue_resource_mask(void *opaque) {
    return ((Display *)opaque)->resource_mask;
}
