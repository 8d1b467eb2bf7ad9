/* barecat's CRC32C, in C without the Python API, so that it builds alone: the compiled
 * module (_compiled.c) includes it, and tests/kernels/test_crc32c_cross.py builds it
 * (in tests/kernels/crc32c_harness.c) for ARMv8 and runs it under emulation. It owns the
 * slicing-by-8 tables (crc_portable), the CPU's instruction (SSE4.2 on x86-64, the CRC
 * extension on ARMv8) in three interleaved streams (crc_hardware), the check at run time
 * of which one the CPU has (detect_hardware), and the finished CRCs (crc32c_of,
 * crc32c_portable_of).
 *
 * Static functions and tables, for one translation unit; call build_tables() and set
 * have_hardware = detect_hardware() once before any CRC.
 */
#ifndef BARECAT_CRC32C_H
#define BARECAT_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BARECAT_X86 1
#include <cpuid.h>
#include <nmmintrin.h>
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define BARECAT_ARM 1
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif
#endif

#define LONG_BLOCK 4096  /* bytes a stream, in the three-stream loop */
#define SHORT_BLOCK 256

static uint32_t crc_table[8][256];
static uint32_t shift_long[4][256];  /* the register after LONG_BLOCK zero bytes */
static uint32_t shift_short[4][256]; /* ... after SHORT_BLOCK zero bytes */
static int have_hardware;

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* The register (not inverted) after the bytes p[0:n], portable: slicing by 8. */
static uint32_t crc_portable(uint32_t s, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        s = crc_table[0][(s ^ *p++) & 0xff] ^ (s >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w = load64(p) ^ s;
        s = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) {
        s = crc_table[0][(s ^ *p++) & 0xff] ^ (s >> 8);
    }
    return s;
}

static uint32_t zeros(uint32_t s, size_t n) {
    while (n--) {
        s = crc_table[0][s & 0xff] ^ (s >> 8);
    }
    return s;
}

/* t[i][b] = the register after n zero bytes from b << 8i: linear in the register, so
 * built from the images of its 32 bits. */
static void build_shift(uint32_t t[4][256], size_t n) {
    uint32_t basis[32];
    for (int k = 0; k < 32; k++) {
        basis[k] = zeros((uint32_t)1 << k, n);
    }
    for (int i = 0; i < 4; i++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = b << (8 * i), x = 0;
            for (int k = 0; k < 32; k++) {
                if (v >> k & 1) {
                    x ^= basis[k];
                }
            }
            t[i][b] = x;
        }
    }
}

static inline uint32_t shifted(uint32_t t[4][256], uint32_t s) {
    return t[0][s & 0xff] ^ t[1][(s >> 8) & 0xff] ^ t[2][(s >> 16) & 0xff] ^ t[3][s >> 24];
}

static void build_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        for (int k = 1; k < 8; k++) {
            crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xff];
        }
    }
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
}

#if defined(BARECAT_X86)
#define HW_TARGET __attribute__((target("sse4.2")))
#define HW_CRC64(s, w) ((uint32_t)_mm_crc32_u64((s), (w)))
#define HW_CRC8(s, b) _mm_crc32_u8((s), (b))
#elif defined(BARECAT_ARM)
#if defined(__clang__)
#define HW_TARGET __attribute__((target("crc")))
#else
#define HW_TARGET __attribute__((target("+crc")))
#endif
#define HW_CRC64(s, w) __crc32cd((s), (w))
#define HW_CRC8(s, b) __crc32cb((s), (b))
#endif

#ifdef HW_TARGET
/* Three streams of `block` bytes each, run side by side (the instruction's latency is
 * three times its throughput), then joined: the register of A|B|C is
 * shift(shift(a) ^ b) ^ c, where shift feeds `block` zero bytes. */
#define THREE_STREAMS(block, table)                                                  \
    while (n >= 3 * (block)) {                                                       \
        uint32_t s1 = 0, s2 = 0;                                                     \
        for (size_t i = 0; i < (block); i += 8) {                                    \
            s = HW_CRC64(s, load64(p + i));                                          \
            s1 = HW_CRC64(s1, load64(p + (block) + i));                              \
            s2 = HW_CRC64(s2, load64(p + 2 * (block) + i));                          \
        }                                                                            \
        s = shifted(table, shifted(table, s) ^ s1) ^ s2;                             \
        p += 3 * (block);                                                            \
        n -= 3 * (block);                                                            \
    }

HW_TARGET static uint32_t crc_hardware(uint32_t s, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        s = HW_CRC8(s, *p++);
        n--;
    }
    THREE_STREAMS(LONG_BLOCK, shift_long)
    THREE_STREAMS(SHORT_BLOCK, shift_short)
    while (n >= 8) {
        s = HW_CRC64(s, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) {
        s = HW_CRC8(s, *p++);
    }
    return s;
}
#endif

static int detect_hardware(void) {
#if defined(BARECAT_X86)
    unsigned int a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
#elif defined(BARECAT_ARM) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#elif defined(BARECAT_ARM) && defined(__APPLE__)
    return 1; /* every Apple ARM CPU has the CRC extension */
#else
    return 0;
#endif
}

/* The finished CRC32C of p[0:n] continuing from the finished `value`. */
static uint32_t crc32c_of(uint32_t value, const unsigned char *p, size_t n) {
    uint32_t s = ~value;
#ifdef HW_TARGET
    if (have_hardware) {
        return ~crc_hardware(s, p, n);
    }
#endif
    return ~crc_portable(s, p, n);
}

/* The same with the tables alone, whatever the CPU (for the tests of that path). */
static uint32_t crc32c_portable_of(uint32_t value, const unsigned char *p, size_t n) {
    return ~crc_portable(~value, p, n);
}

#endif /* BARECAT_CRC32C_H */
