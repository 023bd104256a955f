// Makes the next opt_<name>.glsl an update() on vec4s (p, slot in vec4 units).
#undef T
#undef LD
#undef ST
#define T vec4
#define LD(i) arena[i]
#define ST(i, x) arena[i] = (x)
