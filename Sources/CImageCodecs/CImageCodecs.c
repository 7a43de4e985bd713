// Glue between xpb and Debian's image codecs; see CImageCodecs.h. No codec is implemented here.
#include <X11/xpm.h>
#include <netpbm/pbm.h>
#include <netpbm/pgm.h>
#include <netpbm/ppm.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <turbojpeg.h>
#include <webp/decode.h>
#include <webp/encode.h>
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>

#include "CImageCodecs.h"

static int fail(char *error, size_t error_size, int code, const char *format, ...) {
    if (error && error_size > 0) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error, error_size, format, arguments);
        va_end(arguments);
    }
    return code;
}

// A libtiff failure: its handler wrote the message into `error` itself, so it is copied out
// before being formatted back in (vsnprintf must not read the buffer it writes).
static int fail_tiff(char *error, size_t error_size, int code, const char *otherwise) {
    char message[256];
    snprintf(message, sizeof message, "%s", error && error[0] ? error : otherwise);
    return fail(error, error_size, code, "TIFF: %s", message);
}

static int too_large(char *error, size_t error_size, uint64_t width, uint64_t height, uint64_t max_pixels) {
    return fail(error, error_size, XPB_IMAGE_TOO_LARGE,
                "the image is %llux%llu pixels, more than the limit of %llu pixels",
                (unsigned long long)width, (unsigned long long)height, (unsigned long long)max_pixels);
}

int xpb_image_sniff(const uint8_t *data, size_t size) {
    if (size >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) return XPB_IMAGE_PNG;
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return XPB_IMAGE_JPEG;
    if (size >= 14 && data[0] == 'B' && data[1] == 'M') return XPB_IMAGE_BMP;
    if (size >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0)) return XPB_IMAGE_GIF;
    if (size >= 4 && (memcmp(data, "II*\0", 4) == 0 || memcmp(data, "MM\0*", 4) == 0)) return XPB_IMAGE_TIFF;
    if (size >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0) return XPB_IMAGE_WEBP;
    return 0;
}

// MARK: - TIFF in memory

// A TIFF file in memory for libtiff's client I/O: read from the caller's bytes, or written into
// a buffer that grows.
typedef struct {
    uint8_t *bytes;
    size_t size;
    size_t capacity;
    size_t position;
    int writable;
    char *error;
    size_t error_size;
} memory_file;

static tmsize_t memory_read(thandle_t handle, void *buffer, tmsize_t count) {
    memory_file *file = handle;
    if (count < 0 || file->position >= file->size) return 0;
    size_t available = file->size - file->position;
    size_t n = (size_t)count < available ? (size_t)count : available;
    memcpy(buffer, file->bytes + file->position, n);
    file->position += n;
    return (tmsize_t)n;
}

static tmsize_t memory_write(thandle_t handle, void *buffer, tmsize_t count) {
    memory_file *file = handle;
    if (!file->writable || count < 0) return -1;
    size_t end = file->position + (size_t)count;
    if (end < file->position) return -1;
    if (end > file->capacity) {
        size_t capacity = file->capacity ? file->capacity : 65536;
        while (capacity < end) {
            if (capacity > SIZE_MAX / 2) return -1;
            capacity *= 2;
        }
        uint8_t *grown = realloc(file->bytes, capacity);
        if (!grown) return -1;
        file->bytes = grown;
        file->capacity = capacity;
    }
    if (file->position > file->size) memset(file->bytes + file->size, 0, file->position - file->size);
    memcpy(file->bytes + file->position, buffer, (size_t)count);
    file->position = end;
    if (end > file->size) file->size = end;
    return count;
}

static toff_t memory_seek(thandle_t handle, toff_t offset, int whence) {
    memory_file *file = handle;
    uint64_t base = whence == SEEK_CUR ? file->position : whence == SEEK_END ? file->size : 0;
    uint64_t position = base + offset;
    // Reads never go past the end; writes may (the gap is zero-filled), within reason.
    if (position > (file->writable ? (uint64_t)1 << 40 : file->size)) return (toff_t)-1;
    file->position = (size_t)position;
    return position;
}

static int memory_close(thandle_t handle) { (void)handle; return 0; }
static toff_t memory_size(thandle_t handle) { return ((memory_file *)handle)->size; }
static int memory_map(thandle_t handle, void **base, toff_t *size) { (void)handle; (void)base; (void)size; return 0; }
static void memory_unmap(thandle_t handle, void *base, toff_t size) { (void)handle; (void)base; (void)size; }

// TIFF compressions left out: LERC, Zstandard, LZMA and JBIG. Debian's libtiff.a names every codec
// in its table, so a static link would draw in liblerc (C++, with libstdc++), libzstd, liblzma
// and libjbig: 1.3 MiB for compressions no clipboard carries (applications put uncompressed,
// LZW, Deflate, PackBits or JPEG TIFFs there). Each is one object of libtiff.a that defines
// only its TIFFInitX; defined here, the link takes ours and leaves those objects and their
// libraries out. A TIFF with one of them is refused with a clear error, as libtiff's own build
// without the codec would refuse it. (With the shared libtiff of a debug build, ours take
// precedence the same way.)
static int tiff_not_built(TIFF *tiff, const char *name) {
    TIFFErrorExtR(tiff, "xpb", "%s compression is not supported", name);
    return 0;
}
int TIFFInitLERC(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "LERC"); }
int TIFFInitZSTD(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "Zstandard"); }
int TIFFInitLZMA(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "LZMA"); }
int TIFFInitJBIG(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "JBIG"); }
// Nor do fax (CCITT Group 3 and 4, with their state tables: 135 KB), old-style JPEG, LogLuv,
// PixarLog, NeXT or ThunderScan TIFFs come from a copy: left out the same way (200 KB).
int TIFFInitCCITTRLE(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "CCITT"); }
int TIFFInitCCITTRLEW(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "CCITT"); }
int TIFFInitCCITTFax3(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "CCITT Group 3 fax"); }
int TIFFInitCCITTFax4(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "CCITT Group 4 fax"); }
int TIFFInitOJPEG(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "old-style JPEG"); }
int TIFFInitSGILog(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "SGI LogLuv"); }
int TIFFInitPixarLog(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "PixarLog"); }
int TIFFInitNeXT(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "NeXT"); }
int TIFFInitThunderScan(TIFF *tiff, int scheme) { (void)scheme; return tiff_not_built(tiff, "ThunderScan"); }

// libtiff's messages go to the caller's buffer (the first error), never to stderr.
static int tiff_error(TIFF *tiff, void *user, const char *module, const char *format, va_list arguments) {
    (void)tiff; (void)module;
    memory_file *file = user;
    if (file && file->error && file->error_size > 0 && file->error[0] == 0) vsnprintf(file->error, file->error_size, format, arguments);
    return 1;
}

static int tiff_warning(TIFF *tiff, void *user, const char *module, const char *format, va_list arguments) {
    (void)tiff; (void)user; (void)module; (void)format; (void)arguments;
    return 1;
}

static TIFF *tiff_open(memory_file *file, const char *mode, tmsize_t max_allocation) {
    TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
    if (!options) return NULL;
    TIFFOpenOptionsSetMaxSingleMemAlloc(options, max_allocation);
    TIFFOpenOptionsSetErrorHandlerExtR(options, tiff_error, file);
    TIFFOpenOptionsSetWarningHandlerExtR(options, tiff_warning, file);
    TIFF *tiff = TIFFClientOpenExt("clipboard", mode, file, memory_read, memory_write, memory_seek, memory_close,
                                   memory_size, memory_map, memory_unmap, options);
    TIFFOpenOptionsFree(options);
    return tiff;
}

// libtiff also reports through its process-wide handlers before a TIFF exists (and some paths
// use them regardless): those are silenced once.
static pthread_once_t tiff_once = PTHREAD_ONCE_INIT;
static void tiff_silence(void) {
    TIFFSetErrorHandler(NULL);
    TIFFSetWarningHandler(NULL);
}

// MARK: - Info

// libpng's simplified reader over `data`, its header read.
static int png_begin(png_image *image, const uint8_t *data, size_t size, char *error, size_t error_size) {
    memset(image, 0, sizeof *image);
    image->version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(image, data, size)) {
        return fail(error, error_size, XPB_IMAGE_MALFORMED, "PNG: %s", image->message);
    }
    return XPB_IMAGE_OK;
}

int xpb_image_info(const uint8_t *data, size_t size, uint32_t *width, uint32_t *height, char *error, size_t error_size) {
    if (error && error_size) error[0] = 0;
    switch (xpb_image_sniff(data, size)) {
    case XPB_IMAGE_PNG: {
        png_image image;
        int begun = png_begin(&image, data, size, error, error_size);
        if (begun != XPB_IMAGE_OK) return begun;
        *width = image.width;
        *height = image.height;
        png_image_free(&image);
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_JPEG: {
        tjhandle handle = tjInitDecompress();
        if (!handle) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "JPEG: %s", tjGetErrorStr2(NULL));
        int w = 0, h = 0, subsampling = 0, colorspace = 0;
        int status = tjDecompressHeader3(handle, data, (unsigned long)size, &w, &h, &subsampling, &colorspace);
        if (status != 0) {
            int code = fail(error, error_size, XPB_IMAGE_MALFORMED, "JPEG: %s", tjGetErrorStr2(handle));
            tjDestroy(handle);
            return code;
        }
        tjDestroy(handle);
        *width = (uint32_t)w;
        *height = (uint32_t)h;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_WEBP: {
        int w = 0, h = 0;
        if (!WebPGetInfo(data, size, &w, &h)) return fail(error, error_size, XPB_IMAGE_MALFORMED, "WebP: not a valid WebP header");
        *width = (uint32_t)w;
        *height = (uint32_t)h;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_BMP:
    case XPB_IMAGE_GIF: {
        if (size > INT32_MAX) return fail(error, error_size, XPB_IMAGE_TOO_LARGE, "the file is too large");
        int w = 0, h = 0, components = 0;
        if (!stbi_info_from_memory(data, (int)size, &w, &h, &components)) {
            return fail(error, error_size, XPB_IMAGE_MALFORMED, "%s", stbi_failure_reason());
        }
        // A BMP stored top-down says so by a negative height, which stbi_info passes on as it is.
        if (h < 0 && h != INT32_MIN) h = -h;
        if (w <= 0 || h <= 0) return fail(error, error_size, XPB_IMAGE_MALFORMED, "the image has no pixels");
        *width = (uint32_t)w;
        *height = (uint32_t)h;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_TIFF: {
        pthread_once(&tiff_once, tiff_silence);
        memory_file file = { (uint8_t *)data, size, size, 0, 0, error, error_size };
        TIFF *tiff = tiff_open(&file, "rm", 64 << 20);
        if (!tiff) return fail_tiff(error, error_size, XPB_IMAGE_MALFORMED, "unreadable");
        uint32_t w = 0, h = 0;
        int ok = TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &w) && TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &h);
        TIFFClose(tiff);
        if (!ok) return fail(error, error_size, XPB_IMAGE_MALFORMED, "TIFF: no image size");
        *width = w;
        *height = h;
        return XPB_IMAGE_OK;
    }
    default:
        return fail(error, error_size, XPB_IMAGE_UNSUPPORTED, "not an image in a format xpb decodes (PNG, JPEG, BMP, GIF, TIFF, WebP)");
    }
}

// MARK: - Decode

#define XPB_JPEG_MAX_SCANS 100u
#define XPB_JPEG_MAX_SCAN_PIXELS (1ull << 30)

// The scans of a JPEG: its start-of-scan markers. FF DA cannot occur inside entropy-coded data
// (an FF byte there is followed by 00 or a restart marker), so counting the pair is exact.
static size_t jpeg_scan_count(const uint8_t *data, size_t size) {
    size_t count = 0;
    for (size_t index = 0; index + 1 < size; index++) {
        if (data[index] == 0xFF && data[index + 1] == 0xDA) count++;
    }
    return count;
}

static uint8_t *allocate_pixels(uint32_t width, uint32_t height) {
    size_t count = (size_t)width * (size_t)height * 4;
    return malloc(count ? count : 1);
}

int xpb_image_decode(const uint8_t *data, size_t size, uint64_t max_pixels, xpb_image *out, char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    uint32_t width = 0, height = 0;
    int status = xpb_image_info(data, size, &width, &height, error, error_size);
    if (status != XPB_IMAGE_OK) return status;
    if (width == 0 || height == 0) return fail(error, error_size, XPB_IMAGE_MALFORMED, "the image has no pixels");
    if ((uint64_t)width * height > max_pixels) return too_large(error, error_size, width, height, max_pixels);

    switch (xpb_image_sniff(data, size)) {
    case XPB_IMAGE_PNG: {
        png_image image;
        int begun = png_begin(&image, data, size, error, error_size);
        if (begun != XPB_IMAGE_OK) return begun;
        image.format = PNG_FORMAT_RGBA;
        uint8_t *pixels = allocate_pixels(image.width, image.height);
        if (!pixels) {
            png_image_free(&image);
            return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        }
        if (!png_image_finish_read(&image, NULL, pixels, 0, NULL)) {
            int code = fail(error, error_size, XPB_IMAGE_MALFORMED, "PNG: %s", image.message);
            png_image_free(&image);
            free(pixels);
            return code;
        }
        *out = (xpb_image){ pixels, image.width, image.height };
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_JPEG: {
        // Each scan of a progressive JPEG goes over the whole image again: refused before any
        // decoding when the scans are many or their pixels together too many (600 scans took
        // 3.3 s to fail at libjpeg-turbo's own limit of 500). Ordinary files have 1 to about 20.
        size_t scans = jpeg_scan_count(data, size);
        if (scans > XPB_JPEG_MAX_SCANS || (uint64_t)scans * width * height > XPB_JPEG_MAX_SCAN_PIXELS) {
            return fail(error, error_size, XPB_IMAGE_TOO_LARGE, "JPEG: %zu scans of %ux%u pixels, more work than xpb decodes (at most %u scans, %llu pixels in all)",
                        scans, width, height, XPB_JPEG_MAX_SCANS, (unsigned long long)XPB_JPEG_MAX_SCAN_PIXELS);
        }
        tjhandle handle = tjInitDecompress();
        if (!handle) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "JPEG: %s", tjGetErrorStr2(NULL));
        uint8_t *pixels = allocate_pixels(width, height);
        if (!pixels) {
            tjDestroy(handle);
            return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        }
        // TJFLAG_LIMITSCANS: a progressive JPEG of thousands of scans (a CPU bomb) is refused.
        if (tjDecompress2(handle, data, (unsigned long)size, pixels, (int)width, 0, (int)height, TJPF_RGBA, TJFLAG_LIMITSCANS) != 0
            && tjGetErrorCode(handle) != TJERR_WARNING) {
            int code = fail(error, error_size, XPB_IMAGE_MALFORMED, "JPEG: %s", tjGetErrorStr2(handle));
            tjDestroy(handle);
            free(pixels);
            return code;
        }
        tjDestroy(handle);
        *out = (xpb_image){ pixels, width, height };
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_WEBP: {
        uint8_t *pixels = allocate_pixels(width, height);
        if (!pixels) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        size_t stride = (size_t)width * 4;
        if (!WebPDecodeRGBAInto(data, size, pixels, stride * height, (int)stride)) {
            free(pixels);
            return fail(error, error_size, XPB_IMAGE_MALFORMED, "WebP: the image data is invalid");
        }
        *out = (xpb_image){ pixels, width, height };
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_BMP:
    case XPB_IMAGE_GIF: {
        int w = 0, h = 0, components = 0;
        // The first frame of a GIF.
        uint8_t *decoded = stbi_load_from_memory(data, (int)size, &w, &h, &components, 4);
        if (!decoded) return fail(error, error_size, XPB_IMAGE_MALFORMED, "%s", stbi_failure_reason());
        if (w <= 0 || h <= 0 || (uint64_t)w * (uint64_t)h > max_pixels) {
            stbi_image_free(decoded);
            return too_large(error, error_size, (uint64_t)w, (uint64_t)h, max_pixels);
        }
        uint8_t *pixels = allocate_pixels((uint32_t)w, (uint32_t)h);
        if (!pixels) {
            stbi_image_free(decoded);
            return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        }
        memcpy(pixels, decoded, (size_t)w * (size_t)h * 4);
        stbi_image_free(decoded);
        *out = (xpb_image){ pixels, (uint32_t)w, (uint32_t)h };
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_TIFF: {
        memory_file file = { (uint8_t *)data, size, size, 0, 0, error, error_size };
        // No single allocation of libtiff's larger than the pixels themselves.
        TIFF *tiff = tiff_open(&file, "rm", (tmsize_t)((uint64_t)width * height * 4 + (1 << 20)));
        if (!tiff) return fail(error, error_size, XPB_IMAGE_MALFORMED, "TIFF: unreadable");
        uint8_t *pixels = allocate_pixels(width, height);
        if (!pixels) {
            TIFFClose(tiff);
            return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        }
        // ABGR words, that is R, G, B, A bytes on a little-endian machine: one byte order on both.
        int ok = TIFFReadRGBAImageOriented(tiff, width, height, (uint32_t *)pixels, ORIENTATION_TOPLEFT, 0);
        TIFFClose(tiff);
        if (!ok) {
            free(pixels);
            return fail_tiff(error, error_size, XPB_IMAGE_MALFORMED, "the image data is invalid");
        }
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        for (size_t index = 0; index < (size_t)width * height; index++) {
            uint32_t word = ((uint32_t *)pixels)[index];
            pixels[index * 4] = TIFFGetR(word);
            pixels[index * 4 + 1] = TIFFGetG(word);
            pixels[index * 4 + 2] = TIFFGetB(word);
            pixels[index * 4 + 3] = TIFFGetA(word);
        }
#endif
        // libtiff's RGBA interface premultiplies alpha; the other decoders do not.
        for (size_t index = 0; index < (size_t)width * height; index++) {
            uint8_t *pixel = pixels + index * 4;
            unsigned alpha = pixel[3];
            if (alpha == 0 || alpha == 255) continue;
            for (int channel = 0; channel < 3; channel++) {
                unsigned value = (pixel[channel] * 255u + alpha / 2) / alpha;
                pixel[channel] = (uint8_t)(value > 255 ? 255 : value);
            }
        }
        *out = (xpb_image){ pixels, width, height };
        return XPB_IMAGE_OK;
    }
    default:
        return fail(error, error_size, XPB_IMAGE_UNSUPPORTED, "not an image in a format xpb decodes");
    }
}

// MARK: - Encode

int xpb_image_has_alpha(const xpb_image *image) {
    size_t count = (size_t)image->width * image->height;
    for (size_t index = 0; index < count; index++) {
        if (image->pixels[index * 4 + 3] != 255) return 1;
    }
    return 0;
}

// The RGB bytes of an image: alpha dropped, or for `over_white` transparent pixels composed
// over white.
static uint8_t *rgb_pixels(const xpb_image *image, int over_white) {
    size_t count = (size_t)image->width * image->height;
    uint8_t *rgb = malloc(count * 3 ? count * 3 : 1);
    if (!rgb) return NULL;
    for (size_t index = 0; index < count; index++) {
        const uint8_t *pixel = image->pixels + index * 4;
        unsigned alpha = over_white ? pixel[3] : 255;
        for (int channel = 0; channel < 3; channel++) {
            rgb[index * 3 + channel] = (uint8_t)((pixel[channel] * alpha + 255 * (255 - alpha) + 127) / 255);
        }
    }
    return rgb;
}

typedef struct {
    uint8_t *bytes;
    size_t size;
    size_t capacity;
    int failed;
} growing_buffer;

static void append_bytes(void *context, void *data, int size) {
    growing_buffer *buffer = context;
    if (buffer->failed || size <= 0) return;
    if (buffer->size + (size_t)size > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity * 2 : 65536;
        while (capacity < buffer->size + (size_t)size) capacity *= 2;
        uint8_t *grown = realloc(buffer->bytes, capacity);
        if (!grown) {
            buffer->failed = 1;
            return;
        }
        buffer->bytes = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->bytes + buffer->size, data, (size_t)size);
    buffer->size += (size_t)size;
}

static int encode_tiff(const xpb_image *image, int alpha, uint8_t **out, size_t *out_size, char *error, size_t error_size) {
    pthread_once(&tiff_once, tiff_silence);
    if (error && error_size) error[0] = 0;
    memory_file file = { NULL, 0, 0, 0, 1, error, error_size };
    TIFF *tiff = tiff_open(&file, "w", 0);
    if (!tiff) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "TIFF: cannot start a file");
    uint16_t samples = alpha ? 4 : 3;
    TIFFSetField(tiff, TIFFTAG_IMAGEWIDTH, image->width);
    TIFFSetField(tiff, TIFFTAG_IMAGELENGTH, image->height);
    TIFFSetField(tiff, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tiff, TIFFTAG_SAMPLESPERPIXEL, samples);
    TIFFSetField(tiff, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
    TIFFSetField(tiff, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tiff, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT);
    TIFFSetField(tiff, TIFFTAG_COMPRESSION, COMPRESSION_LZW);
    TIFFSetField(tiff, TIFFTAG_PREDICTOR, PREDICTOR_HORIZONTAL);
    if (alpha) {
        uint16_t extra = EXTRASAMPLE_UNASSALPHA;
        TIFFSetField(tiff, TIFFTAG_EXTRASAMPLES, 1, &extra);
    }
    TIFFSetField(tiff, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(tiff, 0));
    uint8_t *row = malloc((size_t)image->width * samples + 1);
    int ok = row != NULL;
    for (uint32_t y = 0; ok && y < image->height; y++) {
        const uint8_t *source = image->pixels + (size_t)y * image->width * 4;
        if (alpha) {
            memcpy(row, source, (size_t)image->width * 4);
        } else {
            for (uint32_t x = 0; x < image->width; x++) memcpy(row + x * 3, source + x * 4, 3);
        }
        ok = TIFFWriteScanline(tiff, row, y, 0) == 1;
    }
    free(row);
    TIFFClose(tiff);
    if (!ok) {
        free(file.bytes);
        return fail_tiff(error, error_size, XPB_IMAGE_NO_MEMORY, "writing failed");
    }
    *out = file.bytes;
    *out_size = file.size;
    return XPB_IMAGE_OK;
}

// MARK: - Netpbm and XPM (written only)

// Qt's grey: (11 R + 16 G + 5 B) / 32, so that a kept Qt copy's PGM and PBM match Qt's own.
static unsigned grey_of(const uint8_t *pixel) { return (pixel[0] * 11u + pixel[1] * 16u + pixel[2] * 5u) / 32u; }

// libnetpbm reports a failure (a write that fails) by longjmp to a process-wide buffer, and
// prints through a process-wide function: one writer at a time, silenced.
static pthread_mutex_t netpbm_lock = PTHREAD_MUTEX_INITIALIZER;
static void netpbm_quiet(const char *message) { (void)message; }

static int encode_netpbm(const xpb_image *image, int format, uint8_t **out, size_t *out_size, char *error, size_t error_size) {
    char *buffer = NULL;
    size_t size = 0;
    FILE *file = open_memstream(&buffer, &size);
    if (!file) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
    size_t width = image->width;
    void *row = malloc(width * (format == XPB_IMAGE_PPM ? sizeof(pixel) : format == XPB_IMAGE_PGM ? sizeof(gray) : sizeof(bit)) + 1);
    if (!row) {
        fclose(file);
        free(buffer);
        return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
    }
    pthread_mutex_lock(&netpbm_lock);
    jmp_buf jump;
    jmp_buf *saved = NULL;
    volatile int failed = 0;
    pm_setusererrormsgfn(netpbm_quiet);
    pm_setusermessagefn(netpbm_quiet);
    pm_setjmpbufsave(&jump, &saved);
    if (setjmp(jump) != 0) {
        failed = 1;
    } else {
        int cols = (int)image->width, rows = (int)image->height;
        if (format == XPB_IMAGE_PPM) ppm_writeppminit(file, cols, rows, 255, 0);
        if (format == XPB_IMAGE_PGM) pgm_writepgminit(file, cols, rows, 255, 0);
        if (format == XPB_IMAGE_PBM) pbm_writepbminit(file, cols, rows, 0);
        for (uint32_t y = 0; y < image->height; y++) {
            const uint8_t *source = image->pixels + (size_t)y * width * 4;
            for (size_t x = 0; x < width; x++) {
                const uint8_t *p = source + x * 4;
                if (format == XPB_IMAGE_PPM) PPM_ASSIGN(((pixel *)row)[x], p[0], p[1], p[2]);
                if (format == XPB_IMAGE_PGM) ((gray *)row)[x] = grey_of(p);
                if (format == XPB_IMAGE_PBM) ((bit *)row)[x] = grey_of(p) < 128 ? PBM_BLACK : PBM_WHITE;
            }
            if (format == XPB_IMAGE_PPM) ppm_writeppmrow(file, row, cols, 255, 0);
            if (format == XPB_IMAGE_PGM) pgm_writepgmrow(file, row, cols, 255, 0);
            if (format == XPB_IMAGE_PBM) pbm_writepbmrow(file, row, cols, 0);
        }
    }
    pm_setjmpbuf(saved);
    pthread_mutex_unlock(&netpbm_lock);
    free(row);
    int closed = fclose(file);
    if (failed || closed != 0) {
        free(buffer);
        return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "netpbm: writing failed");
    }
    *out = (uint8_t *)buffer;
    *out_size = size;
    return XPB_IMAGE_OK;
}

static int compare_colors(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

// XPM is a format for icons: a pixel is up to 4 characters of text, a colour a line of its
// table, and libXpm makes a copy of all of it. Bounded so that one conversion costs tens of
// megabytes, not gigabytes (64 Mpx of 16.7 M colours took 3.8 GB and 12.6 s): at most
// XPB_XPM_MAX_PIXELS pixels and XPB_XPM_MAX_COLORS colours, else refused as too large.
#define XPB_XPM_MAX_PIXELS (4u << 20)
#define XPB_XPM_MAX_COLORS 65536u

// An XPM through libXpm: the image's colours (a translucent pixel under half opacity is XPM's
// None) named by 1 to 4 characters each.
static int encode_xpm(const xpb_image *image, uint8_t **out, size_t *out_size, char *error, size_t error_size) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.#";
    const uint32_t none = 0xFF000000u;
    size_t count = (size_t)image->width * image->height;
    if (count > XPB_XPM_MAX_PIXELS) {
        return fail(error, error_size, XPB_IMAGE_TOO_LARGE, "XPM holds at most %u pixels (an icon's format); the image has %ux%u",
                    XPB_XPM_MAX_PIXELS, image->width, image->height);
    }
    uint32_t *keys = malloc(count * sizeof *keys);
    uint32_t *colors = malloc(count * sizeof *colors);
    unsigned int *data = malloc(count * sizeof *data);
    int code = XPB_IMAGE_NO_MEMORY;
    XpmColor *table = NULL;
    char *names = NULL;
    size_t ncolors = 0;
    if (!keys || !colors || !data) {
        code = fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        goto done;
    }
    for (size_t index = 0; index < count; index++) {
        const uint8_t *p = image->pixels + index * 4;
        keys[index] = p[3] < 128 ? none : (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    }
    memcpy(colors, keys, count * sizeof *keys);
    qsort(colors, count, sizeof *colors, compare_colors);
    for (size_t index = 0; index < count; index++) {
        if (index == 0 || colors[index] != colors[index - 1]) colors[ncolors++] = colors[index];
    }
    if (ncolors > XPB_XPM_MAX_COLORS) {
        code = fail(error, error_size, XPB_IMAGE_TOO_LARGE, "XPM holds at most %u colours (an icon's format); the image has %zu",
                    XPB_XPM_MAX_COLORS, ncolors);
        goto done;
    }
    unsigned cpp = 1;
    for (size_t capacity = 64; capacity < ncolors; capacity *= 64) cpp += 1;
    for (size_t index = 0; index < count; index++) {
        uint32_t *found = bsearch(&keys[index], colors, ncolors, sizeof *colors, compare_colors);
        data[index] = (unsigned int)(found - colors);
    }
    table = calloc(ncolors, sizeof *table);
    names = malloc(ncolors * (cpp + 1 + 8));
    if (!table || !names) {
        code = fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        goto done;
    }
    for (size_t index = 0; index < ncolors; index++) {
        char *name = names + index * (cpp + 1 + 8);
        size_t value = index;
        for (unsigned digit = 0; digit < cpp; digit++) {
            name[digit] = alphabet[value % 64];
            value /= 64;
        }
        name[cpp] = 0;
        char *colour = name + cpp + 1;
        if (colors[index] == none) {
            strcpy(colour, "None");
        } else {
            snprintf(colour, 8, "#%06X", (unsigned)colors[index]);
        }
        table[index].string = name;
        table[index].c_color = colour;
    }
    XpmImage xpm = { image->width, image->height, cpp, (unsigned int)ncolors, table, data };
    // (libXpm's own buffer writer refuses every image in Debian 12's 3.5.12: its lines, made
    // by XpmCreateDataFromXpmImage, are put in the file's C syntax here.)
    char **lines = NULL;
    int status = XpmCreateDataFromXpmImage(&lines, &xpm, NULL);
    if (status != XpmSuccess || !lines) {
        code = fail(error, error_size, XPB_IMAGE_NO_MEMORY, "XPM: %s", XpmGetErrorString(status));
        goto done;
    }
    static const char head[] = "/* XPM */\nstatic char *image[] = {\n";
    size_t nlines = 1 + ncolors + image->height;
    size_t size = sizeof head - 1 + 3;
    for (size_t index = 0; index < nlines; index++) size += strlen(lines[index]) + 4;
    char *text = malloc(size + 1);
    if (text) {
        char *end = text;
        end = stpcpy(end, head);
        for (size_t index = 0; index < nlines; index++) {
            *end++ = '"';
            end = stpcpy(end, lines[index]);
            end = stpcpy(end, index + 1 < nlines ? "\",\n" : "\"\n");
        }
        end = stpcpy(end, "};\n");
        *out = (uint8_t *)text;
        *out_size = (size_t)(end - text);
        code = XPB_IMAGE_OK;
    } else {
        code = fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
    }
    XpmFree(lines);
done:
    free(keys);
    free(colors);
    free(data);
    free(table);
    free(names);
    return code;
}

int xpb_image_encode(const xpb_image *image, int format, int quality, uint8_t **out, size_t *out_size, char *error, size_t error_size) {
    *out = NULL;
    *out_size = 0;
    if (image->width == 0 || image->height == 0 || image->width > INT32_MAX / 4 || image->height > INT32_MAX) {
        return fail(error, error_size, XPB_IMAGE_TOO_LARGE, "cannot encode an image of %ux%u pixels", image->width, image->height);
    }
    int alpha = xpb_image_has_alpha(image);
    switch (format) {
    case XPB_IMAGE_PNG: {
        png_image png;
        memset(&png, 0, sizeof png);
        png.version = PNG_IMAGE_VERSION;
        png.width = image->width;
        png.height = image->height;
        png.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
        uint8_t *rgb = alpha ? NULL : rgb_pixels(image, 0);
        if (!alpha && !rgb) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        const void *pixels = alpha ? (const void *)image->pixels : rgb;
        png_alloc_size_t size = 0;
        int ok = png_image_write_to_memory(&png, NULL, &size, 0, pixels, 0, NULL);
        uint8_t *bytes = ok ? malloc(size) : NULL;
        ok = bytes && png_image_write_to_memory(&png, bytes, &size, 0, pixels, 0, NULL);
        free(rgb);
        if (!ok) {
            free(bytes);
            int code = fail(error, error_size, XPB_IMAGE_NO_MEMORY, "PNG: %s", png.message);
            png_image_free(&png);
            return code;
        }
        *out = bytes;
        *out_size = size;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_JPEG: {
        if (image->width > 65500 || image->height > 65500) {
            return fail(error, error_size, XPB_IMAGE_TOO_LARGE, "JPEG holds at most 65500x65500 pixels; the image is %ux%u",
                        image->width, image->height);
        }
        /* Full-resolution colour (4:4:4), as libjpeg's cjpeg and ImageMagick choose at quality 90 and
           above: screenshots' coloured text and single-pixel lines keep their colour. */
        tjhandle handle = tjInitCompress();
        if (!handle) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "JPEG: %s", tjGetErrorStr2(NULL));
        uint8_t *rgb = rgb_pixels(image, 1);
        unsigned long capacity = tjBufSize((int)image->width, (int)image->height, TJSAMP_444);
        uint8_t *bytes = rgb && capacity != (unsigned long)-1 ? malloc(capacity) : NULL;
        unsigned long size = capacity;
        int ok = bytes && tjCompress2(handle, rgb, (int)image->width, 0, (int)image->height, TJPF_RGB, &bytes, &size,
                                      TJSAMP_444, quality, TJFLAG_NOREALLOC) == 0;
        int code = ok ? XPB_IMAGE_OK : fail(error, error_size, XPB_IMAGE_NO_MEMORY, "JPEG: %s", tjGetErrorStr2(handle));
        tjDestroy(handle);
        free(rgb);
        if (!ok) {
            free(bytes);
            return code;
        }
        *out = bytes;
        *out_size = size;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_BMP: {
        growing_buffer buffer = { NULL, 0, 0, 0 };
        uint8_t *rgb = alpha ? NULL : rgb_pixels(image, 0);
        if (!alpha && !rgb) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        int ok = stbi_write_bmp_to_func(append_bytes, &buffer, (int)image->width, (int)image->height, alpha ? 4 : 3,
                                        alpha ? (const void *)image->pixels : rgb);
        free(rgb);
        if (!ok || buffer.failed) {
            free(buffer.bytes);
            return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "BMP: writing failed");
        }
        *out = buffer.bytes;
        *out_size = buffer.size;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_WEBP: {
        if (image->width > WEBP_MAX_DIMENSION || image->height > WEBP_MAX_DIMENSION) {
            return fail(error, error_size, XPB_IMAGE_TOO_LARGE, "WebP holds at most %dx%d pixels; the image is %ux%u",
                        WEBP_MAX_DIMENSION, WEBP_MAX_DIMENSION, image->width, image->height);
        }
        uint8_t *encoded = NULL;
        // Lossless: what the clipboard had, pixel for pixel.
        size_t size = WebPEncodeLosslessRGBA(image->pixels, (int)image->width, (int)image->height, (int)image->width * 4, &encoded);
        if (size == 0 || !encoded) {
            WebPFree(encoded);
            return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "WebP: encoding failed");
        }
        uint8_t *bytes = malloc(size);
        if (bytes) memcpy(bytes, encoded, size);
        WebPFree(encoded);
        if (!bytes) return fail(error, error_size, XPB_IMAGE_NO_MEMORY, "out of memory");
        *out = bytes;
        *out_size = size;
        return XPB_IMAGE_OK;
    }
    case XPB_IMAGE_TIFF:
        return encode_tiff(image, alpha, out, out_size, error, error_size);
    case XPB_IMAGE_PPM:
    case XPB_IMAGE_PGM:
    case XPB_IMAGE_PBM:
        return encode_netpbm(image, format, out, out_size, error, error_size);
    case XPB_IMAGE_XPM:
        return encode_xpm(image, out, out_size, error, error_size);
    default:
        return fail(error, error_size, XPB_IMAGE_UNSUPPORTED, "xpb does not write this image format");
    }
}

int xpb_image_resize(const xpb_image *image, uint32_t width, uint32_t height, xpb_image *out) {
    memset(out, 0, sizeof *out);
    if (width == 0 || height == 0) return XPB_IMAGE_MALFORMED;
    uint8_t *pixels = allocate_pixels(width, height);
    if (!pixels) return XPB_IMAGE_NO_MEMORY;
    if (!stbir_resize_uint8_generic(image->pixels, (int)image->width, (int)image->height, 0, pixels, (int)width, (int)height, 0,
                                    4, 3, 0, STBIR_EDGE_CLAMP, STBIR_FILTER_DEFAULT, STBIR_COLORSPACE_SRGB, NULL)) {
        free(pixels);
        return XPB_IMAGE_NO_MEMORY;
    }
    *out = (xpb_image){ pixels, width, height };
    return XPB_IMAGE_OK;
}

void xpb_image_free(void *pointer) { free(pointer); }
