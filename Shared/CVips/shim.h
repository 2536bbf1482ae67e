// libvips' API is mostly C varargs (`vips_thumbnail_buffer(..., "height", h, NULL)`), which Swift cannot call:
// each call the Imaging module makes is a small inline function here, with its options spelled out.
#include <vips/vips.h>

static inline void cvips_quiet(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {}

/// Starts libvips once per process, without the caches that would keep uploads' buffers alive and with one worker
/// per pipeline (every request runs on its own thread already). 0 on success.
static inline int cvips_start(void) {
    if (VIPS_INIT("backend")) return -1;
    // Its warnings are about the bytes of an upload ("ignoring nclx profile"), on standard error outside the JSON
    // log: nothing an operator acts on. Failures still fail the call.
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, cvips_quiet, NULL);
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    return 0;
}

/// The name of the loader libvips would use for these bytes ("VipsForeignLoadJpegBuffer", ...), or NULL.
static inline const char *cvips_loader(const void *bytes, size_t length) {
    return vips_foreign_find_load_buffer(bytes, length);
}

/// The image's header only (nothing is decoded until pixels are asked for), or NULL.
static inline VipsImage *cvips_header(const void *bytes, size_t length) {
    return vips_image_new_from_buffer(bytes, length, "", "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
}

/// Decodes and shrinks to fit `size` × `size` (never enlarging), turned upright by its orientation and converted to
/// sRGB from its embedded profile, streaming (shrink-on-load where the format allows). NULL on error.
static inline VipsImage *cvips_thumbnail(const void *bytes, size_t length, int size) {
    VipsImage *out = NULL;
    if (vips_thumbnail_buffer((void *) bytes, length, &out, size, "height", size, "size", VIPS_SIZE_DOWN,
                              "option_string", "fail_on=error", NULL)) return NULL;
    return out;
}

/// Without alpha, over white (JPEG has none; libvips' default background is black). NULL on error.
static inline VipsImage *cvips_flatten(VipsImage *in) {
    VipsImage *out = NULL;
    double white[3] = {255, 255, 255};
    VipsArrayDouble *background = vips_array_double_new(white, 3);
    int failed = vips_flatten(in, &out, "background", background, NULL);
    vips_area_unref(VIPS_AREA(background));
    return failed ? NULL : out;
}

/// 8-bit sRGB (a 16-bit PNG, a CMYK or grey image). NULL on error.
static inline VipsImage *cvips_srgb(VipsImage *in) {
    VipsImage *srgb = NULL, *out = NULL;
    if (vips_colourspace(in, &srgb, VIPS_INTERPRETATION_sRGB, NULL)) return NULL;
    int failed = vips_cast(srgb, &out, VIPS_FORMAT_UCHAR, NULL);
    g_object_unref(srgb);
    return failed ? NULL : out;
}

/// A baseline JPEG with no metadata at all (`strip`: no Exif, XMP, IPTC, ICC). 0 on success; free `*bytes` with g_free.
static inline int cvips_jpeg(VipsImage *in, int quality, void **bytes, size_t *length) {
    return vips_jpegsave_buffer(in, bytes, length, "Q", quality, "strip", TRUE, "optimize_coding", TRUE, NULL);
}

/// The decoded pixels, band-interleaved bytes. NULL on error; free with g_free.
static inline void *cvips_pixels(VipsImage *in, size_t *length) {
    return vips_image_write_to_memory(in, length);
}

static inline int cvips_width(VipsImage *in) { return vips_image_get_width(in); }
static inline int cvips_height(VipsImage *in) { return vips_image_get_height(in); }
static inline int cvips_bands(VipsImage *in) { return vips_image_get_bands(in); }
static inline int cvips_hasalpha(VipsImage *in) { return vips_image_hasalpha(in); }
static inline void cvips_unref(VipsImage *in) { g_object_unref(in); }
static inline void cvips_free(void *p) { g_free(p); }
/// libvips' last error, cleared.
static inline void cvips_clear_error(void) { vips_error_clear(); }
static inline const char *cvips_error(void) { return vips_error_buffer(); }
