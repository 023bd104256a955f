// The linear index of this invocation in a 1-D problem dispatched as a 2-D
// grid of workgroups (ops_detail::dispatch_1d): a dimension holds at most 65535
// workgroups on many devices, so n > 65535 * local_size spills into y.
uint linear_index() {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
