// Makes the next opt_<name>.glsl an update() on floats (p, slot in floats).
#undef T
#undef LD
#undef ST
#define T float
#define LD(i) arena1[i]
#define ST(i, x) arena1[i] = (x)
