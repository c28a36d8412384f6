/* The C ABI of tarmac's reader: opaque handles, int error codes, and a thread-local
 * message for the last error. Every pointer a function returns into a dataset (keys,
 * blobs, tensors) is valid while that dataset is open (until tarmac_close). */
#ifndef TARMAC_C_API_H
#define TARMAC_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TARMAC_API __attribute__((visibility("default")))
/* 2: tarmac_augment, tarmac_loader_new_augment, _start_seeded; 3: tarmac_api_version,
   tarmac_loader_field_layout, PNG dense maps in augmented batches; 4: tarmac_open_cached */
#define TARMAC_C_API_VERSION 4
#define TARMAC_MAX_DIMS 8

/** Error codes: 0 is success; tarmac_last_error() says why for any other. */
enum {
  TARMAC_OK = 0,
  TARMAC_E_INVALID = 1, /* bad argument, unknown field, wrong buffer size */
  TARMAC_E_RANGE = 2,   /* sample index out of range */
  TARMAC_E_IO = 3,      /* no dataset, file missing or unmappable */
  TARMAC_E_PARSE = 4,   /* labels.safetensors is invalid */
  TARMAC_E_DATA = 5,    /* a sample's data is inconsistent or does not decode */
  TARMAC_E_INTERNAL = 6 /* out of memory or another unexpected failure */
};

/** Field kinds and dtypes as in docs/format.md; dtype codes follow the order
 *  BOOL U8 I8 U16 I16 U32 I32 U64 I64 F16 BF16 F32 F64 (0..12). */
enum { TARMAC_NUMERIC = 0, TARMAC_STRING = 1, TARMAC_JSON = 2 };

typedef struct tarmac_dataset tarmac_dataset;
typedef struct tarmac_loader tarmac_loader;

/** A read-only tensor view. data is valid while the dataset is open. */
typedef struct {
  int32_t dtype; /* dtype code */
  int32_t ndim;
  int64_t shape[TARMAC_MAX_DIMS];
  const void* data;
  size_t nbytes;
  const int64_t* offsets; /* ragged column: [N+1] offsets; NULL otherwise */
} tarmac_tensor;

/** One label field. name is valid while the dataset is open. */
typedef struct {
  const char* name;
  int32_t kind;
  int32_t dtype;
  int32_t ragged;
  int32_t ndim; /* per-sample dims; shape[0] is -1 when ragged */
  int64_t shape[TARMAC_MAX_DIMS];
  uint64_t sample_bytes; /* 0 when ragged */
  int32_t nullable;      /* some samples have no value: see tarmac_has_value, NAME.valid */
} tarmac_field;

/** The TARMAC_C_API_VERSION the library was built with: a binding compares it with the version
 *  it was written for before it declares any other function (the Python package does). */
TARMAC_API int tarmac_api_version(void);
/** The message of the calling thread's last error ("" if none); valid until its next call. */
TARMAC_API const char* tarmac_last_error(void);
/** The safetensors name of a dtype code ("F32"), or NULL. */
TARMAC_API const char* tarmac_dtype_name(int32_t dtype);

/** Opens a dataset folder; an s3:// or http(s):// name is TARMAC_E_INVALID (tarmac_open_cached). */
TARMAC_API int tarmac_open(const char* dir, tarmac_dataset** out);
/** Opens the dataset at an s3:// or http(s):// prefix through the cache folder `cache_dir`
 *  (created; processes may share it), keeping at most `cache_size` bytes there (0: no limit).
 *  Downloads manifest.json, labels.safetensors and shardlist.json now, each shard whole on its
 *  first read (then mapped as a local one), CRC-checked; credentials and endpoint from the
 *  environment as the AWS CLI reads them. Failures, a shard's download included: TARMAC_E_IO,
 *  the message naming the URL, the server's code and what to do. docs/reader.md. */
TARMAC_API int tarmac_open_cached(const char* url, const char* cache_dir, uint64_t cache_size,
                                  tarmac_dataset** out);
/** Closes the dataset; every pointer into it becomes invalid. NULL is accepted. */
TARMAC_API void tarmac_close(tarmac_dataset* ds);
TARMAC_API int64_t tarmac_size(const tarmac_dataset* ds);
/** The value of a __metadata__ entry (NUL-terminated), or NULL when absent. */
TARMAC_API const char* tarmac_metadata(const tarmac_dataset* ds, const char* key);

TARMAC_API int tarmac_num_fields(const tarmac_dataset* ds, int64_t* out);
TARMAC_API int tarmac_field_info(const tarmac_dataset* ds, int64_t k, tarmac_field* out);
TARMAC_API int tarmac_num_blob_kinds(const tarmac_dataset* ds, int64_t* out);
/** The k-th blob kind ("__image__", "__depth__"...). */
TARMAC_API int tarmac_blob_kind(const tarmac_dataset* ds, int64_t k, const char** out);

TARMAC_API int tarmac_key(const tarmac_dataset* ds, int64_t i, const char** data, size_t* size);
/** The stored bytes of sample i's blob of `kind` (NULL: "__image__"). */
TARMAC_API int tarmac_blob(const tarmac_dataset* ds, int64_t i, const char* kind,
                           const uint8_t** data, size_t* size);
/** The shard index, byte offset, size, crc32, width and height of sample i's blob; any out may be
 * NULL. */
TARMAC_API int tarmac_blob_ref(const tarmac_dataset* ds, int64_t i, const char* kind,
                               int32_t* shard, int64_t* offset, int64_t* size, uint32_t* crc32,
                               int32_t* width, int32_t* height);
TARMAC_API int tarmac_num_shards(const tarmac_dataset* ds, int64_t* out);
/** The mapped bytes of shard k (a whole tar file), valid while `ds` is open: with the
 * `<kind>.shard/.offset/.size` columns, a binding can slice blobs itself (checking the range). */
TARMAC_API int tarmac_shard(const tarmac_dataset* ds, int64_t k, const uint8_t** data,
                            size_t* size);
/** Sample i's value of field `name` ("__affine__" included); ragged: its slice. */
TARMAC_API int tarmac_value(const tarmac_dataset* ds, const char* name, int64_t i,
                            tarmac_tensor* out);
/** Sample i's dense map of a blob kind stored as .npy ("__depth__"), zero-copy: dtype code,
 *  shape (H, W) or (H, W, C), data (aligned to 64 bytes), nbytes; offsets NULL. A kind stored
 *  otherwise is TARMAC_E_INVALID; a blob that is no such array, TARMAC_E_DATA. */
TARMAC_API int tarmac_dense(const tarmac_dataset* ds, int64_t i, const char* kind,
                            tarmac_tensor* out);
/** Whether sample i has a value of field `name` (*out 1) or none (0: a nullable field's null). */
TARMAC_API int tarmac_has_value(const tarmac_dataset* ds, const char* name, int64_t i,
                                int32_t* out);
/** The whole column of field `name` (or any tensor name of the file). */
TARMAC_API int tarmac_column(const tarmac_dataset* ds, const char* name, tarmac_tensor* out);

/** Derived columns (DIR/columns/NAME.safetensors, docs/format.md 9): how many, and the k-th
 *  name (sorted). A column computed from another version of the dataset is TARMAC_E_DATA at
 *  every access below. */
TARMAC_API int tarmac_num_derived(const tarmac_dataset* ds, int64_t* out);
TARMAC_API int tarmac_derived_name(const tarmac_dataset* ds, int64_t k, const char** out);
/** Sample i's output of derived column `name`: dtype, its own shape, data; offsets NULL. */
TARMAC_API int tarmac_derived_value(const tarmac_dataset* ds, const char* name, int64_t i,
                                    tarmac_tensor* out);
/** All outputs of derived column `name`: shape [N, ...] when every output has one shape, else
 *  the flat [E] values with offsets [N+1] (element offsets; sample i is values[offsets[i] ..
 *  offsets[i+1]]) set; `shapes` (may be NULL) receives the per-sample shapes, I64 [N, D]. */
TARMAC_API int tarmac_derived_column(const tarmac_dataset* ds, const char* name, tarmac_tensor* out,
                                     tarmac_tensor* shapes);

/** Size of sample i's image once decoded. */
TARMAC_API int tarmac_decoded_size(const tarmac_dataset* ds, int64_t i, int32_t* width,
                                   int32_t* height);
/** Decodes sample i's image into out (height*width*3 bytes, RGB HWC); resize != 0 resizes
 *  an image of another size, else that is TARMAC_E_DATA. */
TARMAC_API int tarmac_decode(const tarmac_dataset* ds, int64_t i, uint8_t* out, size_t size,
                             int32_t width, int32_t height, int resize);

/** Channels of sample i's image as stored: 1 (grey JPEG/PNG) or 3. */
TARMAC_API int tarmac_decoded_channels(const tarmac_dataset* ds, int64_t i, int32_t* channels);
/** tarmac_decode into height*width*channels bytes: channels 3 is RGB (grey replicated), 1 is
 *  grey (colour converted with 0.299 R + 0.587 G + 0.114 B). */
TARMAC_API int tarmac_decode_channels(const tarmac_dataset* ds, int64_t i, uint8_t* out,
                                      size_t size, int32_t width, int32_t height, int32_t channels,
                                      int resize);

/** Number of indices each rank gets (see tarmac_indices). */
TARMAC_API int tarmac_partition_size(uint64_t n, uint64_t rank, uint64_t world, int drop_last,
                                     uint64_t* out);
/** Rank's share of the deterministic per-epoch order of n samples into out[capacity]. */
TARMAC_API int tarmac_indices(uint64_t n, uint64_t rank, uint64_t world, uint64_t seed,
                              uint64_t epoch, int shuffle, int drop_last, int64_t* out,
                              size_t capacity);

/** A decoding thread pool over ds (which must outlive it) for batches of width x height
 *  images (0x0: labels only) and the fixed-shape fields named in fields[nfields].
 *  Not fork-safe: a child process makes its own. */
TARMAC_API int tarmac_loader_new(const tarmac_dataset* ds, int32_t width, int32_t height,
                                 int resize, int32_t threads, const char* const* fields,
                                 size_t nfields, tarmac_loader** out);
/** tarmac_loader_new for batches of `channels` (1 or 3) channels per image: images then
 *  holds n*height*width*channels bytes. */
TARMAC_API int tarmac_loader_new_channels(const tarmac_dataset* ds, int32_t width, int32_t height,
                                          int32_t channels, int resize, int32_t threads,
                                          const char* const* fields, size_t nfields,
                                          tarmac_loader** out);
TARMAC_API void tarmac_loader_free(tarmac_loader* loader);
/** Random geometry per sample in the batch decode (docs/reader.md, "Augmentation"); zero it,
 *  then set what is wanted (scale_min/max and ratio_min/max 0 are taken as 1 and 3/4, 4/3). */
typedef struct {
  int32_t width, height;     /* output size, > 0 */
  double flip;               /* probability of a horizontal flip, [0, 1] */
  const int32_t* flip_pairs; /* 2*nflip_pairs point indices (0-based), swapped after a flip */
  size_t nflip_pairs;
  double rotate;               /* degrees, uniform in [-rotate, rotate] */
  double scale_min, scale_max; /* uniform */
  double translate;            /* fraction of the output size, uniform in [-t, t] */
  int32_t crop;                /* != 0: random resized crop (torchvision's) */
  double crop_min, crop_max;   /* area fraction, (0, 1] */
  double ratio_min, ratio_max; /* aspect ratio of the crop */
  double fill;                 /* the image's border value */
  /* The points fields and boxes fields ("NAME" or "NAME:xyxy") transformed; NULL: those that
   * convert --points / --boxes declared (its manifest). */
  const char* const* points;
  size_t npoints;
  const char* const* boxes;
  size_t nboxes;
} tarmac_augment;

/** tarmac_loader_new_channels with augmentation: images are aug->width x aug->height; fields
 *  may also name "__augment__" (F64 [2, 3], stored pixels -> output), "__flip__" (BOOL) and
 *  dense maps ("__depth__": [height, width(, C)] of the stored dtype, .npy or PNG). */
TARMAC_API int tarmac_loader_new_augment(const tarmac_dataset* ds, const tarmac_augment* aug,
                                         int32_t channels, int32_t threads,
                                         const char* const* fields, size_t nfields,
                                         tarmac_loader** out);
/** Bytes of one sample's value of the loader's field k (the size of its label buffer / n). */
TARMAC_API int tarmac_loader_field_bytes(const tarmac_loader* loader, size_t k, uint64_t* out);
/** The dtype and per-sample shape of the loader's field k (data NULL, nbytes its bytes): a
 *  dense map's is [height, width(, C)] of sample 0's dtype (U8 or U16 for a PNG map). */
TARMAC_API int tarmac_loader_field_layout(const tarmac_loader* loader, size_t k,
                                          tarmac_tensor* out);
/** tarmac_loader_start whose augmentation draws are those of (seed, epoch): sample i's are a
 *  pure function of (seed, epoch, i). */
TARMAC_API int tarmac_loader_start_seeded(tarmac_loader* loader, uint64_t seed, uint64_t epoch,
                                          const int64_t* indices, size_t n, uint8_t* images,
                                          size_t images_size, void* const* labels,
                                          const size_t* label_sizes);
/** Starts loading indices[n] into images (n*height*width*3 bytes) and labels[k]
 *  (n*sample_bytes of field k) in the background; buffers must live until tarmac_loader_wait. */
TARMAC_API int tarmac_loader_start(tarmac_loader* loader, const int64_t* indices, size_t n,
                                   uint8_t* images, size_t images_size, void* const* labels,
                                   const size_t* label_sizes);
/** Waits for the batch in flight; its first error, if any. */
TARMAC_API int tarmac_loader_wait(tarmac_loader* loader);

#ifdef __cplusplus
}
#endif
#endif
