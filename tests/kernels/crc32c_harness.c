/* The compiled core's CRC32C (src/barecat/kernels/crc32c.h) alone, without Python, so that
 * tests/kernels/test_crc32c_cross.py can build it for another architecture (ARMv8, with a
 * cross compiler) and run it there (under qemu's user-mode emulation), as well as here.
 *
 * Reads blobs from stdin, each framed as three little-endian u32 (the starting value, the
 * skew of the blob's first byte from an 8-byte boundary, the length) then the bytes; writes
 * one first line naming the CRC instructions found ("detected: sse4.2", "detected:
 * armv8-crc" or "detected: none"), then per blob a line of two CRCs in hex: crc32c_of (the
 * CPU's instructions where detected) and crc32c_portable_of (the tables). With the
 * argument --portable, crc32c_of uses the tables whatever was detected (the path of CPUs
 * without the instructions, which the emulator has no model of). Exits 0, or 1 on a
 * truncated frame or a full memory, saying so on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/barecat/kernels/crc32c.h"

static int read_exactly(unsigned char *p, size_t n) {
    return fread(p, 1, n, stdin) == n;
}

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const char *detected_name(void) {
#if defined(BARECAT_X86)
    return have_hardware ? "sse4.2" : "none";
#elif defined(BARECAT_ARM)
    return have_hardware ? "armv8-crc" : "none";
#else
    return "none";
#endif
}

int main(int argc, char **argv) {
    build_tables();
    have_hardware = detect_hardware();
    printf("detected: %s\n", detected_name());
    if (argc > 1 && strcmp(argv[1], "--portable") == 0) {
        have_hardware = 0;
    }
    unsigned char header[12];
    unsigned char *buffer = NULL;
    size_t capacity = 0;
    while (read_exactly(header, 1)) {
        if (!read_exactly(header + 1, sizeof header - 1)) {
            fprintf(stderr, "crc32c_harness: a truncated frame header\n");
            return 1;
        }
        uint32_t value = u32_at(header), skew = u32_at(header + 4) % 8;
        size_t n = u32_at(header + 8);
        if (n + 8 > capacity) {
            free(buffer);
            capacity = n + 8;
            buffer = malloc(capacity); /* (aligned to 8 at least, as malloc's are) */
            if (buffer == NULL) {
                fprintf(stderr, "crc32c_harness: no memory for %zu bytes\n", n);
                return 1;
            }
        }
        if (!read_exactly(buffer + skew, n)) {
            fprintf(stderr, "crc32c_harness: a truncated blob of %zu bytes\n", n);
            return 1;
        }
        printf("%08x %08x\n", (unsigned)crc32c_of(value, buffer + skew, n),
               (unsigned)crc32c_portable_of(value, buffer + skew, n));
    }
    free(buffer);
    return fflush(stdout) == 0 ? 0 : 1;
}
