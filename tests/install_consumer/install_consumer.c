/*
 * install_consumer.c - a user program built against an installed
 * libpyramidkv (by CMake package and by pkg-config): sizes a pyramid,
 * drives one policy and checks the library and header versions agree.
 */
#include <pyramidkv/pyramidkv.h>
#include <stdio.h>

int main(void) {
    if (pb_version_number() != PB_VERSION_NUMBER) {
        fprintf(stderr, "header %s, library %s\n", PB_VERSION_STRING,
                pb_version_string());
        return 1;
    }
    if (pb_kvcache_pyramid_budget(512, 0, 32, 4) != 819u) return 1;
    pb_kvcache *p = NULL;
    if (pb_kvcache_pyramidkv_create(NULL, NULL, NULL, &p) != PB_OK) return 1;
    const float w[1] = {1.0f};
    if (pb_kvcache_observe(p, 1, w, 1) != PB_OK) return 1;
    const size_t kept = pb_kvcache_kept_count(p);
    pb_kvcache_destroy(p);
    if (kept != 2u) return 1;
    printf("install consumer: libpyramidkv %s works\n", pb_version_string());
    return 0;
}
