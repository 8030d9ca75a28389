// `stoker serve` and the Python client over shared memory, the client gathers its batches (test/fixtures/serve-shm-route.ts).

import { describeSharedMemoryRoute } from './fixtures/serve-shm-route.js';

describeSharedMemoryRoute(true, 'the client gathers its batches');
