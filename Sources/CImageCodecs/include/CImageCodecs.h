// Image decoding and encoding through Debian's codec libraries: libpng (its simplified API),
// libjpeg-turbo (TurboJPEG), libwebp, libtiff, stb_image (BMP and GIF decoding, BMP writing,
// resizing), and for writing only libnetpbm (PPM, PGM, PBM) and libXpm (XPM). This file is glue only: every codec is the library's. Each decode checks
// the image's declared size against a pixel limit before it allocates its pixels, so a small
// file that claims 60000x60000 is refused with bounded memory.
#ifndef CIMAGECODECS_H
#define CIMAGECODECS_H

#include <stddef.h>
#include <stdint.h>

enum {
    XPB_IMAGE_PNG = 1,
    XPB_IMAGE_JPEG = 2,
    XPB_IMAGE_BMP = 3,
    XPB_IMAGE_GIF = 4,
    XPB_IMAGE_TIFF = 5,
    XPB_IMAGE_WEBP = 6,
    // Written only (Qt offers them; the clipboard manager makes them from the image it keeps).
    XPB_IMAGE_PPM = 7,
    XPB_IMAGE_PGM = 8,
    XPB_IMAGE_PBM = 9,
    XPB_IMAGE_XPM = 10,
};

enum {
    XPB_IMAGE_OK = 0,
    /// Not an image of a format we decode (or encode).
    XPB_IMAGE_UNSUPPORTED = 1,
    /// More pixels than the limit.
    XPB_IMAGE_TOO_LARGE = 2,
    /// The codec refused the bytes.
    XPB_IMAGE_MALFORMED = 3,
    XPB_IMAGE_NO_MEMORY = 4,
};

/// 8-bit RGBA pixels, rows top to bottom, no padding; malloc'd (free with xpb_image_free).
typedef struct {
    uint8_t *pixels;
    uint32_t width;
    uint32_t height;
} xpb_image;

/// The format of `data` by its signature, or 0.
int xpb_image_sniff(const uint8_t *data, size_t size);

/// The declared width and height, from the header only (no pixel is decoded).
int xpb_image_info(const uint8_t *data, size_t size, uint32_t *width, uint32_t *height,
                   char *error, size_t error_size);

/// Decodes the first image in `data`; images of more than `max_pixels` pixels are refused
/// before their pixels are allocated.
int xpb_image_decode(const uint8_t *data, size_t size, uint64_t max_pixels, xpb_image *out,
                     char *error, size_t error_size);

/// Encodes `image` as `format` (PNG, JPEG, BMP, TIFF, WebP, PPM, PGM, PBM or XPM; GIF is not
/// written). Opaque
/// images are written without an alpha channel; JPEG, which has none, gets transparent pixels
/// composed over white. `*out` is malloc'd (free with xpb_image_free).
int xpb_image_encode(const xpb_image *image, int format, int quality, uint8_t **out, size_t *out_size,
                     char *error, size_t error_size);

/// `image` scaled to `width` x `height` (stb_image_resize, alpha-weighted).
int xpb_image_resize(const xpb_image *image, uint32_t width, uint32_t height, xpb_image *out);

/// Whether any pixel is not fully opaque.
int xpb_image_has_alpha(const xpb_image *image);

void xpb_image_free(void *pointer);

#endif
