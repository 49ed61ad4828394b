/*
 * trace_io.h - reading and writing attention trace files (the format of
 * docs/trace_format.md): a streaming reader that holds one record at a time
 * and checks every byte (magic, version, bounded header, shape, record
 * fields, values, CRC-32 of the header and of every record, the end record
 * and its count), and a writer that produces such files.
 *
 * Owns the file format only; what is done with the rows is the caller's
 * (pyramidkv calibrate, replay, trace). A tool, not the library: it does I/O
 * and allocates with malloc.
 */
#ifndef PB_TRACE_IO_H
#define PB_TRACE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PB_TR_VERSION 3u      /* the newest version this code reads */
#define PB_TR_HEADER_MIN 40u  /* the header of versions 1 to 3 */
#define PB_TR_HEADER_MAX 4096u
#define PB_TR_RECORD_HEAD 36u 
#define PB_TR_MAX_LAYERS 65536u
#define PB_TR_MAX_HEADS 65536u
#define PB_TR_MAX_GROUP 1024u
#define PB_TR_MAX_LEN 16777216u      /* keys per row, 2^24 */
#define PB_TR_MAX_ROWS 65536u        /* rows per record */
#define PB_TR_MAX_VALUES 67108864u   /* values per record, 2^26 */
#define PB_TR_GROUP_REDUCED 0xFFFFFFFFu /* qhead of a reduced group */

/* Record kinds. PB_TR_FUTURE (version 2): the rows of the queries that
 * follow a compressed prompt; PB_TR_PREFERENCE (version 3): window rows of
 * the text a runtime measures CAKE's layer preference on
 * (docs/trace_format.md). */
enum { PB_TR_PREFILL = 1, PB_TR_DECODE = 2, PB_TR_FUTURE = 3,
       PB_TR_PREFERENCE = 4 };
enum { PB_TR_F32 = 1, PB_TR_F16 = 2 };

/* The model shape of the header. */
typedef struct pb_tr_shape {
    uint32_t num_layers;
    uint32_t num_kv_heads;
    uint32_t group_size; /* query heads per KV head */
    uint32_t version;    /* 1 to 3 (the reader sets it; the writer writes
                            version 2 or 3 when it is that, else 1) */
} pb_tr_shape;

/* One data record. Prefill: rows observation-window rows, row j the query
 * at position query + j over keys 0 .. length-1 (query + rows == length).
 * Decode: one row, the query at position query over keys 0 .. query
 * (length == query + 1). Future: as prefill, the rows of the queries just
 * after the stream's prompt (query == that prompt's length). Preference:
 * laid out as prefill, the window of a text that is not a prompt. */
typedef struct pb_tr_record {
    uint32_t kind;  /* PB_TR_PREFILL, _DECODE, _FUTURE or _PREFERENCE */
    uint32_t dtype; /* PB_TR_F32 or PB_TR_F16 */
    uint32_t layer, head, qhead;
    uint32_t query, rows, length;
    uint64_t index;  /* 0-based record number */
    uint64_t offset; /* byte offset of the record in the file */
} pb_tr_record;

/* The source of a reader: fread-like, returns the bytes read (fewer only
 * at the end). */
typedef size_t (*pb_tr_read_fn)(void *ctx, void *buf, size_t n);

typedef struct pb_tr_reader pb_tr_reader;

/* Opens a reader over `read`; reads and checks the header. Returns 0, or
 * -1 with a one-line message in err (no newline) and *out NULL. */
int pb_tr_reader_open(pb_tr_read_fn read, void *ctx, pb_tr_reader **out,
                      char *err, size_t err_len);

/* Opens `path` (closed by pb_tr_reader_close). Messages name no path; the
 * caller prefixes it. */
int pb_tr_reader_open_file(const char *path, pb_tr_reader **out, char *err,
                           size_t err_len);

const pb_tr_shape *pb_tr_reader_shape(const pb_tr_reader *r);

/* Reads the next record. Returns 1 with *rec and *values (rows x length
 * float32, converted from float16 when stored so; valid until the next
 * call) set; 0 at the end record, once its count and the end of the file
 * are checked; -1 with a message on any malformation or read error. After
 * 0 or -1 it keeps returning the same. */
int pb_tr_reader_next(pb_tr_reader *r, pb_tr_record *rec,
                      const float **values, char *err, size_t err_len);

/* Closes (and fcloses a file it opened). Accepts NULL. */
void pb_tr_reader_close(pb_tr_reader *r);

/* ------------------------------------------------------------------------ */

typedef struct pb_tr_writer pb_tr_writer;

/* Creates `path` and writes the header. Returns 0 or -1 with a message. */
int pb_tr_writer_open(const char *path, const pb_tr_shape *shape,
                      pb_tr_writer **out, char *err, size_t err_len);

/* Appends a record; rec->kind, dtype, layer, head, qhead, query, rows and
 * length are used (checked as the reader checks them) and values holds
 * rows x length float32, rounded to nearest-even float16 when dtype is
 * PB_TR_F16. Returns 0 or -1 with a message. */
int pb_tr_writer_add(pb_tr_writer *w, const pb_tr_record *rec,
                     const float *values, char *err, size_t err_len);

/* Writes the end record and closes. Returns 0, or -1 with a message (the
 * file is then incomplete). Accepts NULL (returns 0). */
int pb_tr_writer_close(pb_tr_writer *w, char *err, size_t err_len);

/* ------------------------------------------------------------------------ */

/* CRC-32 (IEEE 802.3, reflected 0xEDB88320, as zlib's crc32): continue
 * from `crc` (0 to start). */
uint32_t pb_tr_crc32(uint32_t crc, const void *data, size_t n);

/* IEEE binary16 <-> binary32. to_f16 rounds to nearest, ties to even. */
float pb_tr_f16_to_f32(uint16_t h);
uint16_t pb_tr_f32_to_f16(float f);

#endif /* PB_TRACE_IO_H */
