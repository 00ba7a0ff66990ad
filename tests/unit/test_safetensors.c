/* placeholder, replaced below */
#include "tests/rlx_test.h"
TEST(none) {}
TEST_MAIN(TEST_ENTRY(none))
