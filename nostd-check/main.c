/* Links the no_std static library and drives a peripheral through TIMEOUT and CAPABILITIES,
 * checking the reply bytes against the reference vectors (wire.md section 6.1). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

size_t blerpc_peripheral_size(void);
int blerpc_peripheral_init(const uint8_t *seed);
int blerpc_peripheral_input(uint64_t now_ms, const uint8_t *pdu, size_t len, uint8_t *out, size_t cap);

void platform_random(uint8_t *buf, size_t len) {
    static uint32_t x = 0x12345678u; /* deterministic xorshift: this is a link test */
    for (size_t i = 0; i < len; i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; buf[i] = (uint8_t)x; }
}

static int expect(const char *what, const uint8_t *got, int n, const uint8_t *want, int wn) {
    if (n != wn || memcmp(got, want, (size_t)wn) != 0) {
        fprintf(stderr, "FAIL %s: got %d bytes\n", what, n);
        return 1;
    }
    printf("ok   %s\n", what);
    return 0;
}

int main(void) {
    uint8_t seed[32] = {0x9d};
    uint8_t out[244];
    int fails = 0;
    printf("peripheral connection state: %zu bytes\n", blerpc_peripheral_size());
    if (blerpc_peripheral_init(seed) != 0) { fprintf(stderr, "init failed\n"); return 1; }
    const uint8_t timeout_req[] = {0x00, 0x00, 0xc4, 0x00};
    const uint8_t timeout_resp[] = {0x00, 0x00, 0xc4, 0x02, 0x64, 0x00};
    int n = blerpc_peripheral_input(1, timeout_req, sizeof timeout_req, out, sizeof out);
    fails += expect("TIMEOUT reply", out, n, timeout_resp, sizeof timeout_resp);
    const uint8_t caps_req[] = {0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0};
    const uint8_t caps_resp[] = {0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0xff, 0xff, 0x01, 0x00};
    n = blerpc_peripheral_input(2, caps_req, sizeof caps_req, out, sizeof out);
    fails += expect("CAPABILITIES reply (12288/65535/encryption)", out, n, caps_resp, sizeof caps_resp);
    /* A plaintext request while encryption is required gets ERROR ENCRYPTION_REQUIRED (0x06). */
    const uint8_t echo_req[] = {0x04, 0x00, 0x00, 0x0f, 0x00, 0x0f,
        0x00, 0x04, 'e', 'c', 'h', 'o', 0x07, 0x00, 0x0a, 0x05, 'h', 'e', 'l', 'l', 'o'};
    const uint8_t err_resp[] = {0x04, 0x00, 0xd4, 0x01, 0x06};
    n = blerpc_peripheral_input(3, echo_req, sizeof echo_req, out, sizeof out);
    fails += expect("plaintext request refused", out, n, err_resp, sizeof err_resp);
    return fails ? 1 : 0;
}
