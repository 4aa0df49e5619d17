/* valgrind_threads.c — a small threaded program run under valgrind --leak-check=full by
 * the suite (tests/CMakeLists.txt): the pool's workers must be joined at exit, leaving
 * no thread stack "possibly lost".  With an argument it calls nb_shutdown itself. */
#include <nabla.h>

int main(int argc, char **argv) {
    (void)argv;
    nb_set_num_threads(2);
    nb_tensor *a = nb_arange(0, 1 << 20, 1, NB_F32);
    nb_tensor *s = nb_add(a, a); /* 1 M elements: split over both threads */
    int ok = s && ((const float *)nb_data_ptr(s))[1000] == 2000.0f;
    nb_release(s);
    nb_release(a);
    if (argc > 1) nb_shutdown();
    return ok ? 0 : 1;
}
