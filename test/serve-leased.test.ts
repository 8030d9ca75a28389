// `stoker serve` and the Python client over shared memory, leased batches (test/fixtures/serve-shm-route.ts).

import { describeSharedMemoryRoute } from './fixtures/serve-shm-route.js';

describeSharedMemoryRoute(false, 'leased batches');
