// Makes the next opt_<name>.glsl an update() on vec4s (p, slot in vec4 units).
#undef T
#undef LD
#undef ST
#undef LD0
#undef ST0
#undef LD1
#undef ST1
#undef LD2
#undef ST2
#define T vec4
#define LD(i) arena[i]
#define ST(i, x) arena[i] = (x)
#define LD0(i) slot0[i]
#define ST0(i, x) slot0[i] = (x)
#define LD1(i) slot1[i]
#define ST1(i, x) slot1[i] = (x)
#define LD2(i) slot2[i]
#define ST2(i, x) slot2[i] = (x)
